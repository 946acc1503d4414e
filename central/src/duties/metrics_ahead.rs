//! On every replica: renders `/metrics`' state just before a steady scraper's next scrape, when
//! `service::scrape` asks for it (`Ahead`), so that the scrape finds its text ready. Owns the
//! waiting only; what is rendered and when it is asked for are `service::scrape`'s. Cost: one
//! rendering per expected scrape, the one that scrape would otherwise have waited for.

use std::sync::Arc;

use crate::service::App;

pub async fn run(app: Arc<App>) {
    let mut asked = app.scrape_ahead();
    loop {
        let next = *asked.borrow_and_update();
        let Some(ahead) = next else {
            if asked.changed().await.is_err() {
                return;
            }
            continue;
        };
        tokio::select! {
            () = tokio::time::sleep_until(ahead.render_at) => {
                app.render_ahead(ahead.expected).await;
                app.scrape_ahead_done(ahead);
            }
            // A scrape came first and asked anew.
            changed = asked.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}
