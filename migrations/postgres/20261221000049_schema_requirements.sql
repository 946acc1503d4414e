-- What an older central must know before it runs on this schema: one row per migration that
-- removed or renamed something (a contract step), naming the oldest central version that runs
-- on the schema after it. A migration that only adds writes nothing here, so a central of the
-- previous version keeps starting beside a newer one during a rolling upgrade
-- (store::migrations, docs/compatibility.md).
CREATE TABLE schema_requirements (
    migration   BIGINT PRIMARY KEY,
    min_central TEXT NOT NULL
);
