//! Sending a status page's notice to one subscriber: a webhook gets the notice as JSON (signed
//! when the subscriber gave a secret, `X-Notification-Id` the delivery's id), a mail address
//! gets it in words through central's own mail server (`CENTRAL_MAIL_URL`), with the
//! unsubscribe link in the text and in `List-Unsubscribe`. A subscriber is a stranger and its
//! webhook URL the most hostile address central sends to: webhooks go through a policy of
//! their own (`CENTRAL_SUBSCRIBER_ALLOWED_NETWORKS`, none of the local neighbourhood by
//! default), never the channels' allowances; mail goes to central's own mail server under the
//! channels' policy (the operator chose it). Must not: decide who is told what
//! (`service::status_pages::subscribers`) or when (`duties::page_notices`).

use shared_proto::status_subscribers::{Notice, NoticeEvent};

use super::email::{send_mail, Mail};
use super::{webhook, Notifier};

/// Central's own mail server and sender.
#[derive(Debug, Clone)]
pub struct MailServer {
    pub url: String,
    pub from: String,
}

/// Where one notice goes.
pub enum Recipient<'a> {
    Email(&'a str),
    Webhook {
        url: &'a str,
        secret: Option<&'a str>,
    },
}

impl Notifier {
    /// Whether central can send mail of its own (subscribers by email need it).
    pub fn sends_mail(&self) -> bool {
        self.mail.is_some()
    }

    /// Sends `notice` to `recipient`; the error says what the receiver or the network did.
    pub async fn send_notice(
        &self,
        recipient: Recipient<'_>,
        notice: &Notice,
    ) -> Result<(), String> {
        match recipient {
            Recipient::Webhook { url, secret } => {
                let body = serde_json::to_string(notice).map_err(|e| e.to_string())?;
                webhook::post_with_id(&self.strangers, url, &notice.id, body, secret).await
            }
            Recipient::Email(address) => {
                let Some(mail) = &self.mail else {
                    return Err("central has no mail server (CENTRAL_MAIL_URL)".into());
                };
                let (subject, text) = words(notice);
                let message = Mail {
                    from: &mail.from,
                    to: address,
                    subject: &subject,
                    text,
                    message_id: &notice.id,
                    unsubscribe_url: Some(&notice.unsubscribe_url),
                };
                send_mail(&self.destinations, &mail.url, message).await
            }
        }
    }
}

/// A notice in words: its subject and its text, links last.
pub fn words(notice: &Notice) -> (String, String) {
    let page = &notice.page.title;
    let mut text = String::new();
    let about = notice
        .incident
        .as_ref()
        .map_or("maintenance", |i| i.title.as_str());
    let subject = match notice.event {
        NoticeEvent::SubscriptionConfirm => format!("Confirm your subscription to {page}"),
        NoticeEvent::IncidentCreated => format!("[{page}] New incident: {about}"),
        NoticeEvent::IncidentUpdated => format!("[{page}] Update: {about}"),
        NoticeEvent::IncidentResolved => format!("[{page}] Resolved: {about}"),
        NoticeEvent::MaintenanceStarted => format!("[{page}] Maintenance has begun"),
        NoticeEvent::MaintenanceEnded => format!("[{page}] Maintenance is over"),
    };
    if notice.event == NoticeEvent::SubscriptionConfirm {
        text.push_str(&format!(
            "Someone, probably you, asked to be told of changes on the status page \
             \"{page}\" ({}).\n\nTo confirm, open this link and press the button:\n{}\n\n\
             If it was not you, do nothing: nothing more will be sent.\n",
            notice.page.url,
            notice.confirm_url.as_deref().unwrap_or_default()
        ));
    }
    if let Some(incident) = &notice.incident {
        text.push_str(&format!(
            "{}: {}\n\n{}\n",
            incident.status.words(),
            incident.title,
            incident.message
        ));
    }
    if let Some(maintenance) = &notice.maintenance {
        text.push_str(&format!(
            "Maintenance from {} to {}",
            maintenance.starts_at.to_rfc3339(),
            maintenance.ends_at.to_rfc3339()
        ));
        if !maintenance.monitors.is_empty() {
            text.push_str(&format!(" of {}", maintenance.monitors.join(", ")));
        }
        text.push_str(".\n");
    }
    if notice.event != NoticeEvent::SubscriptionConfirm {
        text.push_str(&format!("\nThe status page: {}\n", notice.page.url));
    }
    text.push_str(&format!(
        "\nTo stop these mails, open this link and press the button:\n{}\n",
        notice.unsubscribe_url
    ));
    // A subject is one line: a title may not hold a line break (checked when written), but
    // a subject folds nothing a stranger typed into a header either way.
    let subject: String = subject.chars().filter(|c| !c.is_control()).collect();
    (subject, text)
}
