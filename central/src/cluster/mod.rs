//! What replicas share besides the database: the assignment versions each knows and which
//! pollers they concern (`versions`).

pub mod versions;
