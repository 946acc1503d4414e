pub mod ingest_rules;
