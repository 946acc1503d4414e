//! The tokens agents hold, as central keeps them: registration tokens (one-time secrets an
//! agent registers with, and the limits they grant) and refresh tokens (an agent's way back
//! to a fresh access token). Only their hashes are kept. The store makes them from its rows
//! (`store::tokens`); services decide on them. Must not: hold a rule or a secret in clear.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistrationToken {
    pub id: String,
    pub name: String,
    pub secret_hash: String,
    pub region: Option<String>,
    /// The most a poller enrolled with it may advertise; `None`: anything.
    pub capabilities: Option<Vec<String>>,
    pub created_at: i64,
    pub expires_at: Option<i64>,
    pub max_uses: i64,
    pub uses: i64,
    pub revoked_at: Option<i64>,
    /// The secret before the newest rotation, valid until `previous_valid_until`.
    pub previous_secret_hash: Option<String>,
    pub previous_valid_until: Option<i64>,
}

/// Why a refresh token was revoked before it was used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnusedRevocation {
    /// Its parent was presented again within the grace (the answer that carried it was lost).
    Superseded,
    /// Made for a refresh that lost its race with another: nobody ever held it.
    Orphaned,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefreshToken {
    pub id: String,
    pub poller_id: String,
    pub family_id: String,
    pub secret_hash: String,
    pub expires_at: i64,
    pub spent_at: Option<i64>,
    pub revoked_at: Option<i64>,
    /// Revoked unused because its parent was presented again within the grace (the answer
    /// that carried it was lost): whoever presents it later replayed a token.
    pub superseded: bool,
    pub replaced_by: Option<String>,
}
