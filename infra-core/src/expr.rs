//! `Expr<T>`: a field value that may only be known once other resources exist.
//!
//! An expression is a literal, the observed value of another resource of the same
//! fleet, the value of one of the fleet's own secrets, or a function of those through
//! [`Expr::map`] and applicative combination ([`Expr::zip`], [`Expr::map2`],
//! [`interp!`](crate::interp), [`compose_secret!`](crate::compose_secret)). There is no
//! `bind`: a value that is unknown until apply can flow into a field, but never into how
//! many resources exist, so the dependency graph is known before anything runs.
//!
//! ```
//! use infra_core::prelude::Expr;
//! let e: Expr<u32> = Expr::lit(1u32).map(|n| n + 1);
//! assert_eq!(e.as_lit(), Some(&2));
//! ```
//!
//! ```compile_fail
//! use infra_core::prelude::Expr;
//! // No bind: an expression cannot choose another expression from a value.
//! let e: Expr<u32> = Expr::lit(1u32).and_then(|n| Expr::lit(n + 1));
//! ```

use std::fmt;
use std::sync::Arc;

use serde::{Serialize, Serializer};

use crate::env::{Dep, Env, NotYet, Nothing};
use crate::key::{KeyId, render_key};
use crate::{Conflict, Key, Kind, Merge, Refines, SecretString};

/// What a value held in an expression must provide: cheap cloning, equality (for flat
/// refinement), serialisation (for plans) and thread safety.
pub trait Value: Clone + PartialEq + Serialize + fmt::Debug + Send + Sync + 'static {}
impl<T: Clone + PartialEq + Serialize + fmt::Debug + Send + Sync + 'static> Value for T {}

/// A description of an expression, for plans: what it reads, never what it computes.
#[derive(Clone, Debug)]
enum Shape {
    Lit(serde_json::Value),
    Observed(KeyId),
    Secret(KeyId),
    Map(Arc<Shape>),
    Ap(Arc<Shape>, Arc<Shape>),
    Template {
        text: Option<Arc<str>>,
        holes: Vec<Shape>,
    },
}

impl Serialize for Shape {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map =
            serializer.serialize_map(Some(if matches!(self, Shape::Template { .. }) {
                2
            } else {
                1
            }))?;
        match self {
            Shape::Lit(v) => map.serialize_entry("lit", v)?,
            Shape::Observed(k) => map.serialize_entry("observed", &render_key(*k))?,
            Shape::Secret(k) => map.serialize_entry("secretValue", &render_key(*k))?,
            Shape::Map(inner) => map.serialize_entry("map", &**inner)?,
            Shape::Ap(f, x) => map.serialize_entry("ap", &[&**f, &**x])?,
            Shape::Template { text, holes } => {
                match text {
                    Some(t) => map.serialize_entry("template", &**t)?,
                    None => map.serialize_entry("template", crate::secret::REDACTED)?,
                }
                map.serialize_entry("holes", holes)?;
            }
        }
        map.end()
    }
}

type Eval<T> = dyn Fn(&dyn Env) -> Option<T> + Send + Sync;

struct Computed<T> {
    deps: Vec<Dep>,
    shape: Shape,
    eval: Box<Eval<T>>,
}

enum Repr<T> {
    Lit(T),
    Computed(Arc<Computed<T>>),
}

/// A value, or a recipe for one from other resources of the same fleet.
///
/// Literals compare by value. Computed expressions hold functions, so two of them are
/// equal (and refine one another) only when they are the same expression.
#[must_use = "an expression does nothing until a spec holds it"]
pub struct Expr<T>(Repr<T>);

impl<T: Value> Expr<T> {
    /// A value known now.
    pub fn lit(value: T) -> Self {
        Expr(Repr::Lit(value))
    }

    fn computed(deps: Vec<Dep>, shape: Shape, eval: Box<Eval<T>>) -> Self {
        Expr(Repr::Computed(Arc::new(Computed { deps, shape, eval })))
    }

    /// The literal value, if this expression is one.
    pub fn as_lit(&self) -> Option<&T> {
        match &self.0 {
            Repr::Lit(v) => Some(v),
            Repr::Computed(_) => None,
        }
    }

    /// Every dependency this expression reads, in order of appearance.
    pub fn deps(&self) -> &[Dep] {
        match &self.0 {
            Repr::Lit(_) => &[],
            Repr::Computed(c) => &c.deps,
        }
    }

    fn shape(&self) -> Shape {
        match &self.0 {
            Repr::Lit(v) => Shape::Lit(serde_json::to_value(v).unwrap_or(serde_json::Value::Null)),
            Repr::Computed(c) => c.shape.clone(),
        }
    }

    /// Evaluates the expression, or says which dependencies are not available yet.
    pub fn eval(&self, env: &dyn Env) -> Result<T, NotYet> {
        match &self.0 {
            Repr::Lit(v) => Ok(v.clone()),
            Repr::Computed(c) => {
                let missing: Vec<Dep> = c
                    .deps
                    .iter()
                    .copied()
                    .filter(|d| !available(env, *d))
                    .collect();
                if !missing.is_empty() {
                    return Err(NotYet { missing });
                }
                (c.eval)(env).ok_or_else(|| NotYet {
                    missing: c.deps.clone(),
                })
            }
        }
    }

    /// Puts the value through a function.
    pub fn map<U: Value>(self, f: impl Fn(&T) -> U + Send + Sync + 'static) -> Expr<U> {
        match self.0 {
            Repr::Lit(v) => Expr::lit(f(&v)),
            Repr::Computed(c) => {
                let deps = c.deps.clone();
                let shape = Shape::Map(Arc::new(c.shape.clone()));
                Expr::computed(
                    deps,
                    shape,
                    Box::new(move |env| (c.eval)(env).map(|v| f(&v))),
                )
            }
        }
    }

    /// Combines two expressions into a pair (the applicative product).
    pub fn zip<U: Value>(self, other: Expr<U>) -> Expr<(T, U)> {
        if let (Repr::Lit(a), Repr::Lit(b)) = (&self.0, &other.0) {
            return Expr::lit((a.clone(), b.clone()));
        }
        let mut deps = self.deps().to_vec();
        deps.extend_from_slice(other.deps());
        let shape = Shape::Ap(Arc::new(self.shape()), Arc::new(other.shape()));
        Expr::computed(
            deps,
            shape,
            Box::new(move |env| Some((self.eval(env).ok()?, other.eval(env).ok()?))),
        )
    }

    /// Combines two expressions with a function (`map2`).
    pub fn map2<U: Value, V: Value>(
        self,
        other: Expr<U>,
        f: impl Fn(&T, &U) -> V + Send + Sync + 'static,
    ) -> Expr<V> {
        self.zip(other).map(move |(a, b)| f(a, b))
    }
}

impl<O: Value> Expr<O> {
    /// The observed state of another resource of this fleet, available once it exists.
    ///
    /// ```
    /// use infra_core::{prelude::Expr, prelude::Key, kinds::{Postgres, PostgresObserved}};
    /// fn endpoint(db: Key<Postgres>) -> Expr<String> {
    ///     Expr::observed(db).map(|o: &PostgresObserved| o.endpoint.clone())
    /// }
    /// ```
    pub fn observed<K: Kind<Observed = O>>(key: Key<K>) -> Self {
        let id = key.id();
        Expr::computed(
            vec![Dep::Observed(id)],
            Shape::Observed(id),
            Box::new(move |env| env.observed(id)?.downcast_ref::<O>().cloned()),
        )
    }
}

impl Expr<SecretString> {
    /// The value of one of this fleet's own secrets, available on the apply path only.
    pub fn secret(key: Key<crate::kinds::Secrets>) -> Self {
        let id = key.id();
        Expr::computed(
            vec![Dep::Secret(id)],
            Shape::Secret(id),
            Box::new(move |env| env.secret(id)),
        )
    }
}

fn available(env: &dyn Env, dep: Dep) -> bool {
    match dep {
        Dep::Handle(k) => env.handle(k).is_some(),
        Dep::Observed(k) => env.observed(k).is_some(),
        Dep::Secret(k) => env.secret(k).is_some(),
    }
}

impl<T: Value> Clone for Expr<T> {
    fn clone(&self) -> Self {
        Expr(match &self.0 {
            Repr::Lit(v) => Repr::Lit(v.clone()),
            Repr::Computed(c) => Repr::Computed(Arc::clone(c)),
        })
    }
}

impl<T: Value> PartialEq for Expr<T> {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Repr::Lit(a), Repr::Lit(b)) => a == b,
            (Repr::Computed(a), Repr::Computed(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl<T: Value> fmt::Debug for Expr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Lit(v) => v.fmt(f),
            Repr::Computed(c) => write!(
                f,
                "Expr({})",
                serde_json::to_string(&c.shape).unwrap_or_default()
            ),
        }
    }
}

impl<T: Value> Serialize for Expr<T> {
    /// A literal serialises as its value; a computed expression as what it reads.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Repr::Lit(v) => v.serialize(serializer),
            Repr::Computed(c) => c.shape.serialize(serializer),
        }
    }
}

impl<T: Value> Refines for Expr<T> {
    /// Flat: a literal refines only an equal literal, a computed expression only itself.
    fn refines(&self, other: &Self) -> bool {
        self == other
    }
}

impl<T: Value> Merge for Expr<T> {
    fn merge(&self, other: &Self) -> Result<Self, Conflict> {
        if self == other {
            Ok(self.clone())
        } else {
            Err(Conflict::between(self, other))
        }
    }
}

impl<T: Value> From<T> for Expr<T> {
    fn from(value: T) -> Self {
        Expr::lit(value)
    }
}

impl From<&str> for Expr<String> {
    fn from(value: &str) -> Self {
        Expr::lit(value.to_owned())
    }
}

type WriteHole = dyn Fn(&dyn Env, &mut String) -> Option<()> + Send + Sync;

/// One hole of a template: an expression whose value is written into the text.
pub struct Hole {
    deps: Vec<Dep>,
    shape: Shape,
    write: Box<WriteHole>,
}

/// An expression that may fill a hole of [`interp!`](crate::interp): any displayable
/// value, but not a secret, whose plaintext must not reach an ordinary field.
///
/// ```
/// use infra_core::{prelude::compose_secret, prelude::Expr, prelude::Key, prelude::SecretString, kinds::Secrets};
/// fn kept_secret(pw: Key<Secrets>) -> Expr<SecretString> {
///     compose_secret!("password={}", Expr::secret(pw))
/// }
/// ```
///
/// ```compile_fail
/// use infra_core::{interp, prelude::Expr, prelude::Key, kinds::Secrets};
/// fn leak(pw: Key<Secrets>) -> Expr<String> {
///     interp!("password={}", Expr::secret(pw)) // a secret cannot fill a plain hole
/// }
/// ```
pub trait PlainHole {
    /// The hole.
    fn into_hole(self) -> Hole;
}

/// An expression that may fill a hole of [`compose_secret!`](crate::compose_secret):
/// any displayable value, or a secret's value.
pub trait SecretHole {
    /// The hole.
    fn into_secret_hole(self) -> Hole;
}

impl<T: Value + fmt::Display> PlainHole for Expr<T> {
    fn into_hole(self) -> Hole {
        Hole {
            deps: self.deps().to_vec(),
            shape: self.shape(),
            write: Box::new(move |env, out| {
                use fmt::Write;
                let v = self.eval(env).ok()?;
                write!(out, "{v}").ok()
            }),
        }
    }
}

impl<T: Value + fmt::Display> SecretHole for Expr<T> {
    fn into_secret_hole(self) -> Hole {
        self.into_hole()
    }
}

impl SecretHole for Expr<SecretString> {
    fn into_secret_hole(self) -> Hole {
        Hole {
            deps: self.deps().to_vec(),
            shape: self.shape(),
            write: Box::new(move |env, out| {
                out.push_str(self.eval(env).ok()?.expose());
                Some(())
            }),
        }
    }
}

/// A template split into literal pieces around its `{}` holes.
fn pieces(template: &str) -> Vec<String> {
    let mut pieces = vec![String::new()];
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('{', Some('{')) | ('}', Some('}')) => {
                chars.next();
                pieces.last_mut().expect("non-empty").push(c);
            }
            ('{', Some('}')) => {
                chars.next();
                pieces.push(String::new());
            }
            ('{', _) | ('}', _) => panic!(
                "template {template:?}: only positional `{{}}` holes are supported (and `{{{{`/`}}}}` for braces)"
            ),
            _ => pieces.last_mut().expect("non-empty").push(c),
        }
    }
    pieces
}

fn template(
    template: &'static str,
    holes: Vec<Hole>,
    redact_text: bool,
) -> (Vec<Dep>, Shape, Box<Eval<String>>) {
    let pieces = pieces(template);
    assert_eq!(
        pieces.len(),
        holes.len() + 1,
        "template {template:?} has {} holes but {} values",
        pieces.len() - 1,
        holes.len()
    );
    let deps = holes.iter().flat_map(|h| h.deps.iter().copied()).collect();
    let shape = Shape::Template {
        text: (!redact_text).then(|| Arc::from(template)),
        holes: holes.iter().map(|h| h.shape.clone()).collect(),
    };
    let eval = Box::new(move |env: &dyn Env| {
        let mut out = String::new();
        for (piece, hole) in pieces.iter().zip(holes.iter().map(Some).chain([None])) {
            out.push_str(piece);
            if let Some(hole) = hole {
                (hole.write)(env, &mut out)?;
            }
        }
        Some(out)
    });
    (deps, shape, eval)
}

#[doc(hidden)]
pub fn __interp(text: &'static str, holes: Vec<Hole>) -> Expr<String> {
    let (deps, shape, eval) = template(text, holes, false);
    if deps.is_empty() {
        // Nothing to wait for: the template is a literal.
        return Expr::lit(eval(&Nothing).expect("a template without holes"));
    }
    Expr::computed(deps, shape, eval)
}

#[doc(hidden)]
pub fn __compose_secret(text: &'static str, holes: Vec<Hole>) -> Expr<SecretString> {
    let (deps, shape, eval) = template(text, holes, true);
    Expr::computed(
        deps,
        shape,
        Box::new(move |env| eval(env).map(SecretString::new)),
    )
}

/// Interpolates expressions into a string; every hole becomes a dependency edge.
///
/// Holes are positional `{}`; their number is checked at compile time. A secret's value
/// cannot fill a hole here (use [`compose_secret!`](crate::compose_secret)).
///
/// ```
/// use infra_core::{interp, prelude::Expr, prelude::Key, kinds::{Postgres, PostgresObserved}};
/// fn url(db: Key<Postgres>) -> Expr<String> {
///     let host = Expr::observed(db).map(|o: &PostgresObserved| o.endpoint.clone());
///     interp!("https://{}/health", host)
/// }
/// ```
///
/// ```
/// use infra_core::{interp, prelude::Expr};
/// let _ = interp!("{}:{}", Expr::lit(1u32), Expr::lit(2u32));
/// ```
///
/// ```compile_fail
/// use infra_core::{interp, prelude::Expr};
/// let _ = interp!("{}:{}", Expr::lit(1u32)); // two holes, one value
/// ```
#[macro_export]
macro_rules! interp {
    ($template:literal $(, $hole:expr)* $(,)?) => {{
        let _ = ::std::format_args!($template $(, ::std::stringify!($hole))*);
        $crate::__private::__interp($template, ::std::vec![$($crate::__private::PlainHole::into_hole($hole)),*])
    }};
}

/// Composes a secret value from the fleet's secrets and other resources' observed
/// values, e.g. a connection string from a master password and a database endpoint.
///
/// The result is an `Expr<SecretString>`: its template text is never shown, and a
/// composition that reads nothing from the fleet is refused by the fleet's checks,
/// because it is a plaintext constant.
///
/// ```
/// use infra_core::{prelude::compose_secret, prelude::Expr, prelude::Key, prelude::SecretString, kinds::{Postgres, PostgresObserved, Secrets}};
/// fn database_url(password: Key<Secrets>, db: Key<Postgres>) -> Expr<SecretString> {
///     let host = Expr::observed(db).map(|o: &PostgresObserved| o.endpoint.clone());
///     compose_secret!("postgres://app:{}@{}/main", Expr::secret(password), host)
/// }
/// ```
#[macro_export]
macro_rules! compose_secret {
    ($template:literal $(, $hole:expr)* $(,)?) => {{
        let _ = ::std::format_args!($template $(, ::std::stringify!($hole))*);
        $crate::__private::__compose_secret(
            $template,
            ::std::vec![$($crate::__private::SecretHole::into_secret_hole($hole)),*],
        )
    }};
}
