-- Monitors as code (issue 25): the objects a configuration file manages, each under the stable
-- key the file names it by. `central apply` writes these marks; the page shows them. An
-- object has at most one key of its kind, and a key names one object.
CREATE TABLE managed_objects (
    kind       TEXT NOT NULL,
    key        TEXT NOT NULL,
    object_id  TEXT NOT NULL,
    applied_at BIGINT NOT NULL,
    PRIMARY KEY (kind, key)
);
CREATE UNIQUE INDEX managed_objects_object ON managed_objects (kind, object_id);
