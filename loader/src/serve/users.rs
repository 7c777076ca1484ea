//! Who may connect to `flamehouse serve`, and as what.
//!
//! Users come from a file (`--users FILE`) and from the environment
//! (`FLAMEHOUSE_WRITER_PASSWORD` defines user `writer`,
//! `FLAMEHOUSE_READER_PASSWORD` user `reader`), never from the command line.
//! The file has one user per line, `#` starts a comment:
//!
//! ```text
//! # name   role     password (plain text, or sha256:HEX of it)
//! grafana  reader   sha256:5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8
//! loader   writer   s3cret
//! ```
//!
//! With no user configured at all there is one: `default`, a writer with an
//! empty password, like a fresh ClickHouse server; the server then refuses
//! to listen anywhere but on a loopback address.

use crate::error::{file_err, Error, Result};
use std::path::Path;

/// What a user may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Read-only (dashboards): SELECT-like statements only, under the
    /// engine's `readonly = 1`; limits may be lowered, never raised.
    Reader,
    /// Everything (loads, schema changes).
    Writer,
}

/// A password as stored.
#[derive(Clone, PartialEq, Eq)]
enum Secret {
    Plain(String),
    Sha256([u8; 32]),
}

/// One user.
#[derive(Clone)]
pub struct User {
    /// The name.
    pub name: String,
    /// The role.
    pub role: Role,
    secret: Secret,
}

impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("name", &self.name)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

/// The users of a server.
#[derive(Debug, Clone)]
pub struct Users {
    users: Vec<User>,
    /// Whether the users are the built-in password-less `default`.
    pub implicit_default: bool,
}

/// Environment variable defining user `writer`'s password.
pub const WRITER_PASSWORD_ENV: &str = "FLAMEHOUSE_WRITER_PASSWORD";
/// Environment variable defining user `reader`'s password.
pub const READER_PASSWORD_ENV: &str = "FLAMEHOUSE_READER_PASSWORD";

impl Users {
    /// The users of `file` (if any) and of the environment.
    pub fn load(file: Option<&Path>) -> Result<Users> {
        let mut users = Vec::new();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(file_err(path))?;
            users = parse(&text).map_err(|(line, why)| Error::File {
                path: path.to_path_buf(),
                cause: std::io::Error::other(format!("line {line}: {why}")),
            })?;
        }
        for (env, name, role) in [
            (WRITER_PASSWORD_ENV, "writer", Role::Writer),
            (READER_PASSWORD_ENV, "reader", Role::Reader),
        ] {
            if let Ok(p) = std::env::var(env) {
                users.retain(|u| u.name != name);
                users.push(User {
                    name: name.into(),
                    role,
                    secret: Secret::Plain(p),
                });
            }
        }
        let implicit_default = users.is_empty();
        if implicit_default {
            users.push(User {
                name: "default".into(),
                role: Role::Writer,
                secret: Secret::Plain(String::new()),
            });
        }
        Ok(Users {
            users,
            implicit_default,
        })
    }

    /// The user `name` if `password` is theirs. The error does not say
    /// which of the two was wrong (as ClickHouse does not).
    pub fn authenticate(&self, name: &str, password: &str) -> Option<&User> {
        let u = self.users.iter().find(|u| u.name == name)?;
        let ok = match &u.secret {
            Secret::Plain(p) => constant_eq(p.as_bytes(), password.as_bytes()),
            Secret::Sha256(h) => constant_eq(h, &sha256(password.as_bytes())),
        };
        ok.then_some(u)
    }

    /// The users anyone may connect as: an empty password (a `--users`
    /// line without one, an empty `FLAMEHOUSE_*_PASSWORD`), plain or as
    /// its SHA-256. A server with one listens on loopback only.
    pub fn without_password(&self) -> Vec<&str> {
        let empty = sha256(b"");
        self.users
            .iter()
            .filter(|u| match &u.secret {
                Secret::Plain(p) => p.is_empty(),
                Secret::Sha256(h) => *h == empty,
            })
            .map(|u| u.name.as_str())
            .collect()
    }

    /// The users' names and roles.
    pub fn list(&self) -> impl Iterator<Item = (&str, Role)> {
        self.users.iter().map(|u| (u.name.as_str(), u.role))
    }
}

fn parse(text: &str) -> std::result::Result<Vec<User>, (usize, String)> {
    let mut users: Vec<User> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // Fields are separated by any run of blanks; the password is the
        // rest of the line.
        let field = |s: &str| -> (String, String) {
            let s = s.trim_start();
            let end = s.find(char::is_whitespace).unwrap_or(s.len());
            (s[..end].to_string(), s[end..].to_string())
        };
        let (name, rest) = field(line);
        let (role, rest) = field(&rest);
        let password = rest.trim();
        let (name, role) = (name.as_str(), role.as_str());
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
        {
            return Err((i + 1, format!("bad user name {name:?}")));
        }
        let role = match role {
            "reader" => Role::Reader,
            "writer" => Role::Writer,
            r => return Err((i + 1, format!("role {r:?} is neither reader nor writer"))),
        };
        let secret = match password.strip_prefix("sha256:") {
            Some(hex) => Secret::Sha256(
                parse_hex(hex).ok_or((i + 1, "sha256: needs 64 hex digits".to_string()))?,
            ),
            None => Secret::Plain(password.to_string()),
        };
        if users.iter().any(|u| u.name == name) {
            return Err((i + 1, format!("user {name} is defined twice")));
        }
        users.push(User {
            name: name.into(),
            role,
            secret,
        });
    }
    Ok(users)
}

fn parse_hex(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Equality that takes the same time wherever the first difference is.
fn constant_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// SHA-256, for `sha256:` passwords.
fn sha256(data: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, data);
    d.as_ref().try_into().expect("32 bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_matches_the_standard_vectors() {
        let hex = |b: [u8; 32]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        assert_eq!(
            hex(sha256(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            hex(sha256(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hex(sha256(&[b'a'; 1000])),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3"
        );
    }

    #[test]
    fn file_users_and_their_errors() {
        let u = parse(
            "# c\ngrafana reader sha256:5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8\nload \t writer   s3 cret\n",
        )
        .unwrap();
        let users = Users {
            users: u,
            implicit_default: false,
        };
        assert_eq!(
            users.authenticate("grafana", "password").unwrap().role,
            Role::Reader
        );
        assert!(users.authenticate("grafana", "passwore").is_none());
        assert_eq!(
            users.authenticate("load", "s3 cret").unwrap().role,
            Role::Writer
        );
        assert!(users.authenticate("nobody", "").is_none());
        assert_eq!(parse("a admin x").unwrap_err().0, 1);
        assert_eq!(parse("\na reader x\na writer y").unwrap_err().0, 3);
        assert_eq!(parse("a reader sha256:12").unwrap_err().0, 1);
    }
}
