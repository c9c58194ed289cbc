//! The daemon's bearer tokens: `~/.maia/serve-tokens.json` keeps each
//! token's name, role, session and the SHA-256 of the token, never the
//! token itself; `maia serve token add` prints the token once.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What a connection may do in a session it attaches to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Prompts, answers questions, cancels, changes the session.
    Controller,
    /// Reads only: every write request is refused.
    Observer,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Controller => "controller",
            Role::Observer => "observer",
        }
    }
}

/// What a connection's token allows.
#[derive(Debug, Clone)]
pub struct Access {
    /// The token's name (the audit lines name it). A name is not the
    /// token: a revoked name may be given to a new token at once.
    pub name: String,
    /// The token's identity: its hash, as kept in the file. What a
    /// connection holds is checked against it, never against the name.
    pub hash: String,
    pub role: Role,
    /// The one session it may use, when limited to one.
    pub session: Option<String>,
}

impl Access {
    pub fn may_see(&self, session: &str) -> bool {
        self.session.as_deref().is_none_or(|only| only == session)
    }

    /// Whether `entries` still hold this very token with the same rights
    /// (a token revoked, or its name given to another token, does not).
    pub fn holds(&self, entries: &[Entry]) -> bool {
        entries
            .iter()
            .any(|e| e.hash == self.hash && e.role == self.role && e.session == self.session)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub name: String,
    /// Lowercase hex SHA-256 of the token.
    pub hash: String,
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// Why a token file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a token list: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("a token named `{0}` exists already (revoke it first)")]
    Exists(String),
    #[error("no token is named `{0}`")]
    Unknown(String),
    #[error("a token name is 1 to 64 letters, digits, `-`, `_` or `.`")]
    BadName,
}

/// The token file of the user whose HOME is `home`.
pub fn path(home: &Path) -> PathBuf {
    home.join(".maia").join("serve-tokens.json")
}

pub fn hash(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub fn load(path: &Path) -> Result<Vec<Entry>, TokenError> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).map_err(|source| TokenError::Parse {
            path: path.to_owned(),
            source,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(TokenError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

fn save(path: &Path, entries: &[Entry]) -> Result<(), TokenError> {
    let write = |source| TokenError::Write {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(write)?;
    }
    let text = serde_json::to_string_pretty(entries).unwrap_or_default();
    crate::settings_file::remove_stale_tmp(path);
    let tmp = path.with_extension(format!("json.tmp{}", std::process::id()));
    {
        use std::io::Write;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&tmp).map_err(write)?;
        file.write_all(text.as_bytes()).map_err(write)?;
        file.sync_all().map_err(write)?;
    }
    if let Err(e) = maia_core::fault_point!("tokens.written") {
        let _ = std::fs::remove_file(&tmp);
        return Err(write(e));
    }
    std::fs::rename(&tmp, path).map_err(write)
}

/// Adds a token; answers the token (to print once).
pub fn add(
    path: &Path,
    name: &str,
    role: Role,
    session: Option<String>,
) -> Result<String, TokenError> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !valid {
        return Err(TokenError::BadName);
    }
    let mut entries = load(path)?;
    if entries.iter().any(|e| e.name == name) {
        return Err(TokenError::Exists(name.to_owned()));
    }
    let token = format!("maia_{}", secret());
    entries.push(Entry {
        name: name.to_owned(),
        hash: hash(&token),
        role,
        session,
    });
    save(path, &entries)?;
    Ok(token)
}

pub fn revoke(path: &Path, name: &str) -> Result<(), TokenError> {
    let mut entries = load(path)?;
    let before = entries.len();
    entries.retain(|e| e.name != name);
    if entries.len() == before {
        return Err(TokenError::Unknown(name.to_owned()));
    }
    save(path, &entries)
}

/// 244 random bits from the OS (two v4 UUIDs), as 64 hex digits: a
/// token's, or a web login's id.
pub fn secret() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// What the token `presented` allows, if it is one of `entries`.
pub fn check(entries: &[Entry], presented: &str) -> Option<Access> {
    by_hash(entries, &hash(presented))
}

/// What the token hashed `hashed` allows, if it is one of `entries`.
pub fn by_hash(entries: &[Entry], hashed: &str) -> Option<Access> {
    entries.iter().find(|e| e.hash == hashed).map(|e| Access {
        name: e.name.clone(),
        hash: e.hash.clone(),
        role: e.role,
        session: e.session.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_hash_is_kept_and_a_revoked_token_is_refused() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = path(dir.path());
        let token = add(&file, "phone", Role::Observer, Some("s1".into()))
            .unwrap_or_else(|e| panic!("{e}"));
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(!text.contains(&token), "{text}");
        let entries = load(&file).unwrap_or_default();
        let access = check(&entries, &token).unwrap_or_else(|| panic!("refused"));
        assert_eq!(
            (access.role, access.session.as_deref()),
            (Role::Observer, Some("s1"))
        );
        assert!(check(&entries, "maia_wrong").is_none());
        assert!(matches!(
            add(&file, "phone", Role::Controller, None),
            Err(TokenError::Exists(_))
        ));
        revoke(&file, "phone").unwrap_or_else(|e| panic!("{e}"));
        assert!(check(&load(&file).unwrap_or_default(), &token).is_none());
        // The name given again is another token: the old one's access is gone.
        add(&file, "phone", Role::Observer, Some("s1".into())).unwrap_or_else(|e| panic!("{e}"));
        assert!(!access.holds(&load(&file).unwrap_or_default()));
        assert!(matches!(
            add(&file, "a b", Role::Controller, None),
            Err(TokenError::BadName)
        ));
    }
}
