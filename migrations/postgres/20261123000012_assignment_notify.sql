-- Every new assignment version is announced to all central replicas, so a long poll waiting on
-- one replica wakes when another changed its poller's assignments. The notification is sent
-- when the transaction that bumped the version commits, and never if it rolls back.
-- (PostgreSQL only: a SQLite central is a single process and wakes its long polls in memory.)
CREATE FUNCTION announce_assignment_version() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('central_assignment_version', NEW.version::text);
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER assignment_version_announced
    AFTER UPDATE OF version ON assignment_state
    FOR EACH ROW EXECUTE FUNCTION announce_assignment_version();
