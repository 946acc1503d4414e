-- Dependencies between monitors (`service::parents`). A monitor's parents as written (a JSON
-- array, for its views), and a row per parent and child: a parent's children are read through
-- the primary key (whom its change of status concerns, whom its notice names), a child's
-- parents through `monitor_parents_child` (cycles, the status reason).
ALTER TABLE monitors ADD COLUMN parent_ids TEXT;
CREATE TABLE monitor_parents (
    parent_id TEXT NOT NULL,
    child_id  TEXT NOT NULL,
    PRIMARY KEY (parent_id, child_id)
);
CREATE INDEX monitor_parents_child ON monitor_parents (child_id);
