//! Mail through SMTP (lettre): `smtp://host:port` (plain, or STARTTLS with `?tls=required`),
//! `smtps://host:port` (TLS), with `user:password@` when the server wants a login. The
//! notification id is in the `Message-ID`, so a mail filter can drop duplicates.

use lettre::message::header::ContentType;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use shared_proto::notifications::Notification;

pub async fn send(
    url: &str,
    from: &str,
    to: &[String],
    message: &Notification,
) -> Result<(), String> {
    let mut builder = Message::builder()
        .from(from.parse().map_err(|e| format!("sender `{from}`: {e}"))?)
        .subject(super::headline(message))
        .message_id(Some(format!("<{}@central.notifications>", message.id)))
        .header(ContentType::TEXT_PLAIN);
    for recipient in to {
        builder = builder.to(recipient
            .parse()
            .map_err(|e| format!("recipient `{recipient}`: {e}"))?);
    }
    let mut text = format!(
        "{}\n\nevent: {}\nstatus: {}\nat: {}\nnotification id: {}\n",
        message.message,
        message.event.as_str(),
        message.status,
        message.at.to_rfc3339(),
        message.id
    );
    if let Some(locations) = &message.locations {
        text.push_str("\nlocations:\n");
        for location in locations {
            let status = serde_json::to_value(location.status).unwrap_or_default();
            text.push_str(&format!(
                "  {}: {}\n",
                location.region,
                status.as_str().unwrap_or("?")
            ));
        }
    }
    let mail = builder
        .body(text)
        .map_err(|e| format!("building the mail: {e}"))?;
    let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
        .map_err(|e| format!("the SMTP url: {e}"))?
        .timeout(Some(super::SEND_TIMEOUT))
        .build();
    transport
        .send(mail)
        .await
        .map(|_| ())
        .map_err(|e| format!("the SMTP server refused or failed: {e}"))
}
