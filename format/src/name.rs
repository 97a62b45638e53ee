//! [`Name`]: a function, file, module or API name read from a dump, stored once per distinct
//! text and shared by every frame and record that carries it.
//!
//! A dump repeats the same few thousand names across hundreds of thousands of frames; reading
//! each into its own `String` made the parsed dump larger than the file. Interning happens only
//! inside [`interning`], the scope the reader opens around one parse; outside it a `Name` is a
//! plain shared string. Nothing here may panic or keep names alive after the scope ends.

use std::borrow::Borrow;
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An immutable, cheaply cloned string.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(Arc<str>);

impl Name {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Self {
        Name(s.into())
    }
}

impl From<String> for Name {
    fn from(s: String) -> Self {
        Name(s.into())
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

thread_local! {
    /// The names of the parse in progress on this thread, if one is interning.
    static NAMES: RefCell<Option<HashSet<Arc<str>>>> = const { RefCell::new(None) };
}

/// Runs `parse` with interning on: equal names it deserializes share one allocation. The table
/// is dropped when `parse` returns (the names live on in what was parsed). Nested scopes share
/// the outer table.
pub fn interning<T>(parse: impl FnOnce() -> T) -> T {
    struct Scope(bool);
    impl Drop for Scope {
        fn drop(&mut self) {
            if self.0 {
                NAMES.with(|n| n.borrow_mut().take());
            }
        }
    }
    let outer = NAMES.with(|n| {
        let mut n = n.borrow_mut();
        let had = n.is_some();
        if !had {
            *n = Some(HashSet::new());
        }
        had
    });
    let _scope = Scope(!outer);
    parse()
}

fn intern(s: &str) -> Name {
    NAMES.with(|n| match n.borrow_mut().as_mut() {
        Some(set) => match set.get(s) {
            Some(a) => Name(Arc::clone(a)),
            None => {
                let a: Arc<str> = s.into();
                set.insert(Arc::clone(&a));
                Name(a)
            }
        },
        None => Name(s.into()),
    })
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct NameVisitor;
        impl Visitor<'_> for NameVisitor {
            type Value = Name;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Name, E> {
                Ok(intern(v))
            }
        }
        d.deserialize_str(NameVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_names_share_one_allocation_only_while_interning() {
        let parse = || -> Vec<Name> { serde_json::from_str(r#"["a", "bb", "a", "bb"]"#).unwrap() };
        let v = interning(parse);
        assert_eq!(v, ["a", "bb", "a", "bb"].map(Name::from));
        assert!(Arc::ptr_eq(&v[0].0, &v[2].0));
        assert!(Arc::ptr_eq(&v[1].0, &v[3].0));
        let v = parse();
        assert!(!Arc::ptr_eq(&v[0].0, &v[2].0));
        NAMES.with(|n| assert!(n.borrow().is_none()));
    }
}
