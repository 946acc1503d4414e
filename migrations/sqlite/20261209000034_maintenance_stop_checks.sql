-- A maintenance window may stop the checks of the monitors it names by id or tag while it is
-- under way (`service::maintenance::stopping`): placement leaves them unplaced then.
ALTER TABLE maintenance_windows ADD COLUMN stop_checks BIGINT NOT NULL DEFAULT 0;
