-- Assignment versions this database never issued (issue 70). Each start of central moves the
-- version up to at least the start's time in microseconds and records the versions it skipped
-- (strictly between `after_version` and `before_version`). An agent that names one of them got
-- it from another history of this database (the original of a restored copy, which went on
-- after the copy was made) and is sent its full set, which drops the monitors this database
-- does not have. One row per start that moved the version.
CREATE TABLE assignment_skips (
    after_version  BIGINT NOT NULL,
    before_version BIGINT NOT NULL,
    at             BIGINT NOT NULL
);
