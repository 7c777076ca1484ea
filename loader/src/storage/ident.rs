//! Validated SQL identifiers: every name a user gives (database, cluster)
//! that the loader writes into SQL text goes through [`Ident`], so no path
//! can splice an unchecked string into a statement.

use crate::error::{Error, Result};

/// Longest identifier accepted, in bytes.
///
/// A database name becomes a directory and metadata file name on every
/// replica (file systems stop at 255 bytes, ClickHouse escapes some bytes
/// into three), and it is repeated in every error message and dashboard
/// URL; 64 bytes is far above any real name and far below those limits.
pub const MAX_IDENT_LEN: usize = 64;

/// The engine's own databases (ClickHouse's `system`, `information_schema`
/// in both spellings, and its temporary tables' database): never a
/// flamehouse database, compared without case.
pub const RESERVED_DATABASES: [&str; 3] = [
    "system",
    "information_schema",
    "_temporary_and_external_tables",
];

/// Whether `name` is one of [`RESERVED_DATABASES`], in any case.
fn is_reserved_database(name: &str) -> bool {
    RESERVED_DATABASES
        .iter()
        .any(|r| r.eq_ignore_ascii_case(name))
}

/// A name that is safe to write into SQL unquoted: `[A-Za-z_][A-Za-z0-9_]*`,
/// at most [`MAX_IDENT_LEN`] bytes.
///
/// Restricting instead of quoting keeps the schema templates, the Grafana
/// queries and ClickHouse's own paths (`/var/lib/clickhouse/data/NAME`,
/// ZooKeeper paths of Replicated tables) free of escaping rules: a name
/// outside the set is refused with a one-line error before anything runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ident(String);

impl Ident {
    /// Validates `name` (`what` names the option in the error, e.g.
    /// `database`).
    pub fn parse_as(what: &str, name: &str) -> Result<Ident> {
        let bad = |why: &str| Error::Ident {
            what: what.to_string(),
            name: name.to_string(),
            why: why.to_string(),
        };
        let mut chars = name.chars();
        match chars.next() {
            None => return Err(bad("it is empty")),
            Some(c) if !(c.is_ascii_alphabetic() || c == '_') => {
                return Err(bad("it must start with a letter or `_`"))
            }
            _ => {}
        }
        if let Some(c) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_'))
        {
            return Err(bad(&format!(
                "{c:?} is not allowed (only letters, digits and `_`)"
            )));
        }
        if name.len() > MAX_IDENT_LEN {
            return Err(bad(&format!("it is longer than {MAX_IDENT_LEN} bytes")));
        }
        Ok(Ident(name.to_string()))
    }

    /// Validates a database name: an identifier that is none of the
    /// engine's own databases ([`RESERVED_DATABASES`], any case). Those
    /// are Memory databases: tables created in them are gone at the next
    /// start while their data directories stay (a load into
    /// `information_schema` said it stored what the next run had lost).
    pub fn database(name: &str) -> Result<Ident> {
        let ident = Self::parse_as("database", name)?;
        if is_reserved_database(name) {
            return Err(Error::Ident {
                what: "database".to_string(),
                name: name.to_string(),
                why: "it is one of the engine's own databases, whose tables are not kept; \
                      choose another name"
                    .to_string(),
            });
        }
        Ok(ident)
    }

    /// Validates a name (errors call it an identifier).
    pub fn new(name: &str) -> Result<Ident> {
        Self::parse_as("identifier", name)
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for Ident {
    type Err = Error;
    fn from_str(s: &str) -> Result<Ident> {
        Ident::new(s)
    }
}

impl std::fmt::Display for Ident {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for Ident {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_letters_digits_and_underscores() {
        for ok in [
            "flamehouse",
            "_x",
            "fh_cli2",
            "A",
            &"a".repeat(MAX_IDENT_LEN),
        ] {
            assert_eq!(Ident::new(ok).unwrap().as_str(), ok);
        }
        for bad in [
            "",
            "x; DROP DATABASE flamehouse",
            "bad-name",
            "1db",
            "a.b",
            "a`b",
            "a b",
            "café",
            "x'",
            &"a".repeat(MAX_IDENT_LEN + 1),
        ] {
            let e = Ident::parse_as("database", bad).unwrap_err().to_string();
            assert!(e.starts_with("invalid database "), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
        for reserved in [
            "system",
            "SYSTEM",
            "information_schema",
            "INFORMATION_SCHEMA",
            "_temporary_and_external_tables",
        ] {
            assert!(Ident::parse_as("database", reserved).is_ok());
            let e = Ident::database(reserved).unwrap_err().to_string();
            assert!(
                e.starts_with("invalid database ") && e.contains("the engine's own"),
                "{e}"
            );
        }
        for fine in ["flamehouse", "default", "_", "systems", "my_system"] {
            assert!(Ident::database(fine).is_ok(), "{fine}");
        }
    }
}
