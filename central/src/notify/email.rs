//! Mail through SMTP (lettre): `smtp://host:port` (plain, or STARTTLS with `?tls=required`),
//! `smtps://host:port` (TLS), with `user:password@` when the server wants a login. The
//! notification id is in the `Message-ID`, so a mail filter can drop duplicates. The server's
//! name is resolved under `destination`'s policy and the connection goes to the address that
//! answer gave (TLS still verifies the name).

use lettre::message::header::ContentType;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use shared_proto::notifications::Notification;

use super::destination::Destinations;

/// A transport to `url`'s server at the address its name has now, if that one is permitted.
async fn pinned_transport(
    url: &str,
    destinations: &Destinations,
) -> Result<AsyncSmtpTransport<Tokio1Executor>, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("the SMTP url: {e}"))?;
    let host = parsed
        .host_str()
        .ok_or("the SMTP url has no host")?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = parsed.port().unwrap_or(25);
    let address = destinations.resolve(&host, port).await?[0];
    let mut pinned = parsed.clone();
    pinned
        .set_ip_host(address.ip())
        .map_err(|()| "the SMTP url cannot take an address".to_string())?;
    let builder = AsyncSmtpTransport::<Tokio1Executor>::from_url(pinned.as_str())
        .map_err(|e| format!("the SMTP url: {e}"))?;
    // TLS verifies the server's name, not the address it was reached at.
    let tls_mode = parsed
        .query_pairs()
        .find(|(k, _)| k == "tls")
        .map(|(_, v)| v.to_string());
    let parameters =
        || TlsParameters::new(host.clone()).map_err(|e| format!("TLS for {host}: {e}"));
    let builder = match (parsed.scheme(), tls_mode.as_deref()) {
        ("smtps", _) => builder.tls(Tls::Wrapper(parameters()?)),
        ("smtp", Some("required")) => builder.tls(Tls::Required(parameters()?)),
        ("smtp", Some("opportunistic")) => builder.tls(Tls::Opportunistic(parameters()?)),
        _ => builder,
    };
    Ok(builder.timeout(Some(super::SEND_TIMEOUT)).build())
}

pub async fn send(
    destinations: &Destinations,
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
            text.push_str(&format!(
                "  {}: {}\n",
                location.region,
                location.status.as_str()
            ));
        }
    }
    let mail = builder
        .body(text)
        .map_err(|e| format!("building the mail: {e}"))?;
    deliver(destinations, url, mail).await
}

/// A mail of its own (a status page's notice to a subscriber): `text` to `to`, with
/// `List-Unsubscribe` (and RFC 8058's one-click `List-Unsubscribe-Post`) when it has an
/// unsubscribe link, so mail programs offer the button, which unsubscribes by a `POST`.
pub struct Mail<'a> {
    pub from: &'a str,
    pub to: &'a str,
    pub subject: &'a str,
    pub text: String,
    pub message_id: &'a str,
    pub unsubscribe_url: Option<&'a str>,
}

pub async fn send_mail(
    destinations: &Destinations,
    url: &str,
    mail: Mail<'_>,
) -> Result<(), String> {
    use lettre::message::header::{HeaderName, HeaderValue};
    let mut builder = Message::builder()
        .from(
            mail.from
                .parse()
                .map_err(|e| format!("sender `{}`: {e}", mail.from))?,
        )
        .to(mail.to.parse().map_err(|e| format!("recipient: {e}"))?)
        .subject(mail.subject)
        .message_id(Some(format!("<{}@central.notices>", mail.message_id)))
        .header(ContentType::TEXT_PLAIN);
    if let Some(link) = mail.unsubscribe_url {
        builder = builder
            .raw_header(HeaderValue::new(
                HeaderName::new_from_ascii_str("List-Unsubscribe"),
                format!("<{link}>"),
            ))
            .raw_header(HeaderValue::new(
                HeaderName::new_from_ascii_str("List-Unsubscribe-Post"),
                "List-Unsubscribe=One-Click".into(),
            ));
    }
    let message = builder
        .body(mail.text)
        .map_err(|e| format!("building the mail: {e}"))?;
    deliver(destinations, url, message).await
}

async fn deliver(destinations: &Destinations, url: &str, mail: Message) -> Result<(), String> {
    let transport = pinned_transport(url, destinations).await?;
    transport
        .send(mail)
        .await
        .map(|_| ())
        .map_err(|e| format!("the SMTP server refused or failed: {e}"))
}
