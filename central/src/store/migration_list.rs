//! The schema's migrations, compiled in from `migrations/<database>/`: `(version, description,
//! SQL)` for each backend, oldest first, applied by `migrations`. A change to the schema is a
//! new file there and a row here, for both backends.

pub(super) const SQLITE_MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        20261121000001,
        "init",
        include_str!("../../../migrations/sqlite/20261121000001_init.sql"),
    ),
    (
        20261121000002,
        "engine reports",
        include_str!("../../../migrations/sqlite/20261121000002_engine_reports.sql"),
    ),
    (
        20261121000003,
        "token lifecycle",
        include_str!("../../../migrations/sqlite/20261121000003_token_lifecycle.sql"),
    ),
    (
        20261121000004,
        "assignment log",
        include_str!("../../../migrations/sqlite/20261121000004_assignment_log.sql"),
    ),
    (
        20261121000005,
        "online since",
        include_str!("../../../migrations/sqlite/20261121000005_online_since.sql"),
    ),
    (
        20261121000006,
        "poller status changes",
        include_str!("../../../migrations/sqlite/20261121000006_poller_status_changes.sql"),
    ),
    (
        20261121000007,
        "poller errors",
        include_str!("../../../migrations/sqlite/20261121000007_poller_errors.sql"),
    ),
    (
        20261121000008,
        "verdict time",
        include_str!("../../../migrations/sqlite/20261121000008_verdict_time.sql"),
    ),
    (
        20261121000009,
        "refresh revoked reason",
        include_str!("../../../migrations/sqlite/20261121000009_refresh_revoked_reason.sql"),
    ),
    (
        20261121000010,
        "registration overlap",
        include_str!("../../../migrations/sqlite/20261121000010_registration_overlap.sql"),
    ),
    (
        20261123000011,
        "leases",
        include_str!("../../../migrations/sqlite/20261123000011_leases.sql"),
    ),
    (
        20261123000013,
        "lease held since",
        include_str!("../../../migrations/sqlite/20261123000013_lease_held_since.sql"),
    ),
    (
        20261124000014,
        "locations",
        include_str!("../../../migrations/sqlite/20261124000014_locations.sql"),
    ),
    (
        20261124000015,
        "notifications",
        include_str!("../../../migrations/sqlite/20261124000015_notifications.sql"),
    ),
    (
        20261125000016,
        "rollups",
        include_str!("../../../migrations/sqlite/20261125000016_rollups.sql"),
    ),
    (
        20261125000017,
        "web sessions",
        include_str!("../../../migrations/sqlite/20261125000017_web_sessions.sql"),
    ),
    (
        20261126000018,
        "outbox per channel",
        include_str!("../../../migrations/sqlite/20261126000018_outbox_per_channel.sql"),
    ),
    (
        20261126000019,
        "alertmanager api",
        include_str!("../../../migrations/sqlite/20261126000019_alertmanager_api.sql"),
    ),
    (
        20261127000020,
        "verdict state",
        include_str!("../../../migrations/sqlite/20261127000020_verdict_state.sql"),
    ),
    (
        20261128000021,
        "uptime time",
        include_str!("../../../migrations/sqlite/20261128000021_uptime_time.sql"),
    ),
    (
        20261129000022,
        "token limits",
        include_str!("../../../migrations/sqlite/20261129000022_token_limits.sql"),
    ),
    (
        20261130000023,
        "alert due",
        include_str!("../../../migrations/sqlite/20261130000023_alert_due.sql"),
    ),
    (
        20261201000024,
        "assignment log version",
        include_str!("../../../migrations/sqlite/20261201000024_assignment_log_version.sql"),
    ),
    (
        20261201000025,
        "location shown status",
        include_str!("../../../migrations/sqlite/20261201000025_location_shown_status.sql"),
    ),
    (
        20261201000026,
        "placement due",
        include_str!("../../../migrations/sqlite/20261201000026_placement_due.sql"),
    ),
    (
        20261202000027,
        "alert due steady",
        include_str!("../../../migrations/sqlite/20261202000027_alert_due_steady.sql"),
    ),
    (
        20261203000028,
        "poller commands",
        include_str!("../../../migrations/sqlite/20261203000028_poller_commands.sql"),
    ),
    (
        20261204000029,
        "dependencies",
        include_str!("../../../migrations/sqlite/20261204000029_dependencies.sql"),
    ),
    (
        20261205000030,
        "maintenance_windows",
        include_str!("../../../migrations/sqlite/20261205000030_maintenance_windows.sql"),
    ),
    (
        20261206000031,
        "tags",
        include_str!("../../../migrations/sqlite/20261206000031_tags.sql"),
    ),
    (
        20261207000032,
        "parents",
        include_str!("../../../migrations/sqlite/20261207000032_parents.sql"),
    ),
    (
        20261208000033,
        "heartbeats",
        include_str!("../../../migrations/sqlite/20261208000033_heartbeats.sql"),
    ),
    (
        20261209000034,
        "maintenance_stop_checks",
        include_str!("../../../migrations/sqlite/20261209000034_maintenance_stop_checks.sql"),
    ),
    (
        20261210000035,
        "users",
        include_str!("../../../migrations/sqlite/20261210000035_users.sql"),
    ),
    (
        20261211000036,
        "audit",
        include_str!("../../../migrations/sqlite/20261211000036_audit.sql"),
    ),
    (
        20261212000037,
        "audit_key_user",
        include_str!("../../../migrations/sqlite/20261212000037_audit_key_user.sql"),
    ),
    (
        20261213000038,
        "managed_objects",
        include_str!("../../../migrations/sqlite/20261213000038_managed_objects.sql"),
    ),
    (
        20261214000039,
        "api_key_maker",
        include_str!("../../../migrations/sqlite/20261214000039_api_key_maker.sql"),
    ),
    // SQLite only: the results head's index (see `result_index`).
    (
        20261215000040,
        "result_index",
        include_str!("../../../migrations/sqlite/20261215000040_result_index.sql"),
    ),
    (
        20261216000041,
        "rollups_folded",
        include_str!("../../../migrations/sqlite/20261216000041_rollups_folded.sql"),
    ),
    (
        20261217000042,
        "lease_seen_by",
        include_str!("../../../migrations/sqlite/20261217000042_lease_seen_by.sql"),
    ),
    (
        20261218000043,
        "api_keys_made_by",
        include_str!("../../../migrations/sqlite/20261218000043_api_keys_made_by.sql"),
    ),
    (
        20261219000044,
        "sso_links",
        include_str!("../../../migrations/sqlite/20261219000044_sso_links.sql"),
    ),
    (
        20261220000045,
        "api_key_addresses",
        include_str!("../../../migrations/sqlite/20261220000045_api_key_addresses.sql"),
    ),
    (
        20261220000046,
        "audit_intents",
        include_str!("../../../migrations/sqlite/20261220000046_audit_intents.sql"),
    ),
    (
        20261220000047,
        "held_results",
        include_str!("../../../migrations/sqlite/20261220000047_held_results.sql"),
    ),
    (
        20261220000048,
        "assignment_skips",
        include_str!("../../../migrations/sqlite/20261220000048_assignment_skips.sql"),
    ),
    (
        20261221000049,
        "schema requirements",
        include_str!("../../../migrations/sqlite/20261221000049_schema_requirements.sql"),
    ),
    (
        20261222000050,
        "status pages",
        include_str!("../../../migrations/sqlite/20261222000050_status_pages.sql"),
    ),
    (
        20261223000051,
        "status incidents",
        include_str!("../../../migrations/sqlite/20261223000051_status_incidents.sql"),
    ),
    (
        20261224000052,
        "status auto incidents",
        include_str!("../../../migrations/sqlite/20261224000052_status_auto_incidents.sql"),
    ),
    (
        20261225000053,
        "status subscribers",
        include_str!("../../../migrations/sqlite/20261225000053_status_subscribers.sql"),
    ),
    (
        20261226000054,
        "status page logos",
        include_str!("../../../migrations/sqlite/20261226000054_status_page_logos.sql"),
    ),
    (
        20261227000055,
        "status notices by age",
        include_str!("../../../migrations/sqlite/20261227000055_status_notices_by_age.sql"),
    ),
];
pub(super) const POSTGRES_MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        20261121000001,
        "init",
        include_str!("../../../migrations/postgres/20261121000001_init.sql"),
    ),
    (
        20261121000002,
        "engine reports",
        include_str!("../../../migrations/postgres/20261121000002_engine_reports.sql"),
    ),
    (
        20261121000003,
        "token lifecycle",
        include_str!("../../../migrations/postgres/20261121000003_token_lifecycle.sql"),
    ),
    (
        20261121000004,
        "assignment log",
        include_str!("../../../migrations/postgres/20261121000004_assignment_log.sql"),
    ),
    (
        20261121000005,
        "online since",
        include_str!("../../../migrations/postgres/20261121000005_online_since.sql"),
    ),
    (
        20261121000006,
        "poller status changes",
        include_str!("../../../migrations/postgres/20261121000006_poller_status_changes.sql"),
    ),
    (
        20261121000007,
        "poller errors",
        include_str!("../../../migrations/postgres/20261121000007_poller_errors.sql"),
    ),
    (
        20261121000008,
        "verdict time",
        include_str!("../../../migrations/postgres/20261121000008_verdict_time.sql"),
    ),
    (
        20261121000009,
        "refresh revoked reason",
        include_str!("../../../migrations/postgres/20261121000009_refresh_revoked_reason.sql"),
    ),
    (
        20261121000010,
        "registration overlap",
        include_str!("../../../migrations/postgres/20261121000010_registration_overlap.sql"),
    ),
    (
        20261123000011,
        "leases",
        include_str!("../../../migrations/postgres/20261123000011_leases.sql"),
    ),
    // PostgreSQL only: the trigger behind cross-replica wake-ups (see `wakeups`).
    (
        20261123000012,
        "assignment notify",
        include_str!("../../../migrations/postgres/20261123000012_assignment_notify.sql"),
    ),
    (
        20261123000013,
        "lease held since",
        include_str!("../../../migrations/postgres/20261123000013_lease_held_since.sql"),
    ),
    (
        20261124000014,
        "locations",
        include_str!("../../../migrations/postgres/20261124000014_locations.sql"),
    ),
    (
        20261124000015,
        "notifications",
        include_str!("../../../migrations/postgres/20261124000015_notifications.sql"),
    ),
    (
        20261125000016,
        "rollups",
        include_str!("../../../migrations/postgres/20261125000016_rollups.sql"),
    ),
    (
        20261125000017,
        "web sessions",
        include_str!("../../../migrations/postgres/20261125000017_web_sessions.sql"),
    ),
    (
        20261126000018,
        "outbox per channel",
        include_str!("../../../migrations/postgres/20261126000018_outbox_per_channel.sql"),
    ),
    (
        20261126000019,
        "alertmanager api",
        include_str!("../../../migrations/postgres/20261126000019_alertmanager_api.sql"),
    ),
    (
        20261127000020,
        "verdict state",
        include_str!("../../../migrations/postgres/20261127000020_verdict_state.sql"),
    ),
    (
        20261128000021,
        "uptime time",
        include_str!("../../../migrations/postgres/20261128000021_uptime_time.sql"),
    ),
    (
        20261129000022,
        "token limits",
        include_str!("../../../migrations/postgres/20261129000022_token_limits.sql"),
    ),
    (
        20261130000023,
        "alert due",
        include_str!("../../../migrations/postgres/20261130000023_alert_due.sql"),
    ),
    (
        20261201000024,
        "assignment log version",
        include_str!("../../../migrations/postgres/20261201000024_assignment_log_version.sql"),
    ),
    (
        20261201000025,
        "location shown status",
        include_str!("../../../migrations/postgres/20261201000025_location_shown_status.sql"),
    ),
    (
        20261201000026,
        "placement due",
        include_str!("../../../migrations/postgres/20261201000026_placement_due.sql"),
    ),
    (
        20261202000027,
        "alert due steady",
        include_str!("../../../migrations/postgres/20261202000027_alert_due_steady.sql"),
    ),
    (
        20261203000028,
        "poller commands",
        include_str!("../../../migrations/postgres/20261203000028_poller_commands.sql"),
    ),
    (
        20261204000029,
        "dependencies",
        include_str!("../../../migrations/postgres/20261204000029_dependencies.sql"),
    ),
    (
        20261205000030,
        "maintenance_windows",
        include_str!("../../../migrations/postgres/20261205000030_maintenance_windows.sql"),
    ),
    (
        20261206000031,
        "tags",
        include_str!("../../../migrations/postgres/20261206000031_tags.sql"),
    ),
    (
        20261207000032,
        "parents",
        include_str!("../../../migrations/postgres/20261207000032_parents.sql"),
    ),
    (
        20261208000033,
        "heartbeats",
        include_str!("../../../migrations/postgres/20261208000033_heartbeats.sql"),
    ),
    (
        20261209000034,
        "maintenance_stop_checks",
        include_str!("../../../migrations/postgres/20261209000034_maintenance_stop_checks.sql"),
    ),
    (
        20261210000035,
        "users",
        include_str!("../../../migrations/postgres/20261210000035_users.sql"),
    ),
    (
        20261211000036,
        "audit",
        include_str!("../../../migrations/postgres/20261211000036_audit.sql"),
    ),
    (
        20261212000037,
        "audit_key_user",
        include_str!("../../../migrations/postgres/20261212000037_audit_key_user.sql"),
    ),
    (
        20261213000038,
        "managed_objects",
        include_str!("../../../migrations/postgres/20261213000038_managed_objects.sql"),
    ),
    (
        20261214000039,
        "api_key_maker",
        include_str!("../../../migrations/postgres/20261214000039_api_key_maker.sql"),
    ),
    (
        20261216000041,
        "rollups_folded",
        include_str!("../../../migrations/postgres/20261216000041_rollups_folded.sql"),
    ),
    (
        20261217000042,
        "lease_seen_by",
        include_str!("../../../migrations/postgres/20261217000042_lease_seen_by.sql"),
    ),
    (
        20261218000043,
        "api_keys_made_by",
        include_str!("../../../migrations/postgres/20261218000043_api_keys_made_by.sql"),
    ),
    (
        20261219000044,
        "sso_links",
        include_str!("../../../migrations/postgres/20261219000044_sso_links.sql"),
    ),
    (
        20261220000045,
        "api_key_addresses",
        include_str!("../../../migrations/postgres/20261220000045_api_key_addresses.sql"),
    ),
    (
        20261220000046,
        "audit_intents",
        include_str!("../../../migrations/postgres/20261220000046_audit_intents.sql"),
    ),
    (
        20261220000047,
        "held_results",
        include_str!("../../../migrations/postgres/20261220000047_held_results.sql"),
    ),
    (
        20261220000048,
        "assignment_skips",
        include_str!("../../../migrations/postgres/20261220000048_assignment_skips.sql"),
    ),
    (
        20261221000049,
        "schema requirements",
        include_str!("../../../migrations/postgres/20261221000049_schema_requirements.sql"),
    ),
    (
        20261222000050,
        "status pages",
        include_str!("../../../migrations/postgres/20261222000050_status_pages.sql"),
    ),
    (
        20261223000051,
        "status incidents",
        include_str!("../../../migrations/postgres/20261223000051_status_incidents.sql"),
    ),
    (
        20261224000052,
        "status auto incidents",
        include_str!("../../../migrations/postgres/20261224000052_status_auto_incidents.sql"),
    ),
    (
        20261225000053,
        "status subscribers",
        include_str!("../../../migrations/postgres/20261225000053_status_subscribers.sql"),
    ),
    (
        20261226000054,
        "status page logos",
        include_str!("../../../migrations/postgres/20261226000054_status_page_logos.sql"),
    ),
    (
        20261227000055,
        "status notices by age",
        include_str!("../../../migrations/postgres/20261227000055_status_notices_by_age.sql"),
    ),
];
