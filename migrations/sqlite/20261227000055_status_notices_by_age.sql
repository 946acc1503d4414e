-- What upkeep prunes of status pages' notices (store::status_subscribers::prune_subscriptions):
-- settled deliveries and their notices past a week, found by age rather than by reading them
-- all; subscriptions never confirmed, by when their confirmation was sent.
CREATE INDEX status_notice_deliveries_by_age ON status_notice_deliveries (created_at);
CREATE INDEX status_notices_by_age ON status_notices (created_at);
CREATE INDEX status_subscribers_unconfirmed ON status_subscribers (status, confirm_sent_at);
CREATE INDEX status_notice_deliveries_by_notice ON status_notice_deliveries (notice_id);
