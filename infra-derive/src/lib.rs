#![doc = include_str!("../README.md")]

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as Tokens};
use quote::{format_ident, quote};
use syn::{
    Attribute, Data, DeriveInput, Fields, GenericArgument, Ident, LitStr, Path, PathArguments,
    Type, parse_macro_input, spanned::Spanned,
};

/// Derives `Refines`, `Merge`, `Field`, `Settle`, `Serialize` and a settled struct for a
/// spec struct, and `Kind` when `#[spec(kind = "…", observed = Type)]` is given.
#[proc_macro_derive(Spec, attributes(spec))]
pub fn derive_spec(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match spec(&input) {
        Ok(tokens) => tokens.into(),
        Err(err) => err.to_compile_error().into(),
    }
}

/// Derives `infra_core::testing::Sample`: a proptest strategy over a small domain.
#[proc_macro_derive(Sample)]
pub fn derive_sample(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match sample(&input) {
        Ok(tokens) => tokens.into(),
        Err(err) => err.to_compile_error().into(),
    }
}

#[derive(Default)]
struct StructAttrs {
    kind: Option<LitStr>,
    observed: Option<Type>,
    check: Option<Path>,
    name_rule: Option<Path>,
}

#[derive(Default)]
struct FieldAttrs {
    replace: bool,
    if_set: bool,
    instruction: Option<LitStr>,
    set: bool,
    sensitive: bool,
    replace_when: Option<Path>,
}

fn struct_attrs(attrs: &[Attribute]) -> syn::Result<StructAttrs> {
    let mut out = StructAttrs::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("spec")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("kind") {
                out.kind = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("observed") {
                out.observed = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("check") {
                out.check = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("name_rule") {
                out.name_rule = Some(meta.value()?.parse()?);
            } else {
                return Err(meta.error(
                    "expected one of `kind = \"…\"`, `observed = Type`, `check = path`, `name_rule = path`",
                ));
            }
            Ok(())
        })?;
    }
    if out.kind.is_some() != out.observed.is_some() {
        return Err(syn::Error::new(
            Span::call_site(),
            "a kind needs both `kind = \"…\"` and `observed = Type`",
        ));
    }
    Ok(out)
}

fn field_attrs(attrs: &[Attribute]) -> syn::Result<FieldAttrs> {
    let mut out = FieldAttrs::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("spec")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("replace") {
                out.replace = true;
            } else if meta.path.is_ident("if_set") {
                out.if_set = true;
            } else if meta.path.is_ident("instruction") {
                out.instruction = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("set") {
                out.set = true;
            } else if meta.path.is_ident("sensitive") {
                out.sensitive = true;
            } else if meta.path.is_ident("replace_when") {
                out.replace_when = Some(meta.value()?.parse()?);
            } else {
                return Err(meta.error(
                    "expected `replace`, `if_set`, `instruction = \"…\"`, `set`, `sensitive` or `replace_when = path`",
                ));
            }
            Ok(())
        })?;
    }
    Ok(out)
}

fn docs(attrs: &[Attribute]) -> Vec<&Attribute> {
    attrs.iter().filter(|a| a.path().is_ident("doc")).collect()
}

/// `image_id` → `imageId`.
fn camel(ident: &Ident) -> String {
    let raw = ident.to_string();
    let raw = raw.strip_prefix("r#").unwrap_or(&raw);
    let mut out = String::with_capacity(raw.len());
    let mut upper = false;
    for ch in raw.chars() {
        if ch == '_' {
            upper = true;
        } else if upper {
            out.extend(ch.to_uppercase());
            upper = false;
        } else {
            out.push(ch);
        }
    }
    out
}

/// The settled type of a field type, spelled the way a reader expects where the shape
/// is known (`Expr<T>` → `T`, `Key<K>` → `Handle<K>`, through `Partial`, `Option`,
/// `Vec` and `BTreeMap`), and as the `Settle::Settled` projection otherwise. The settle
/// function assigns the projection into this type, so a wrong guess fails to compile.
fn settled_type(ty: &Type) -> Tokens {
    if let Type::Path(tp) = ty
        && tp.qself.is_none()
        && let Some(last) = tp.path.segments.last()
        && let PathArguments::AngleBracketed(args) = &last.arguments
    {
        let types: Vec<&Type> = args
            .args
            .iter()
            .filter_map(|a| match a {
                GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect();
        let name = last.ident.to_string();
        match (name.as_str(), types.as_slice()) {
            ("Expr", [inner]) => return quote!(#inner),
            ("Key", [inner]) => return quote!(::infra_core::__private::Handle<#inner>),
            ("Partial", [inner]) => {
                let inner = settled_type(inner);
                return quote!(::infra_core::__private::Partial<#inner>);
            }
            ("Option", [inner]) => {
                let inner = settled_type(inner);
                return quote!(::core::option::Option<#inner>);
            }
            ("Vec", [inner]) => {
                let inner = settled_type(inner);
                return quote!(::std::vec::Vec<#inner>);
            }
            ("BTreeMap", [k, v]) => {
                let v = settled_type(v);
                return quote!(::std::collections::BTreeMap<#k, #v>);
            }
            _ => {}
        }
    }
    quote!(<#ty as ::infra_core::__private::Settle>::Settled)
}

/// Whether a type names one of `names` anywhere in it (`Partial<Expr<BTreeSet<_>>>`
/// names `BTreeSet`).
fn mentions(ty: &Type, names: &[&str]) -> bool {
    let text = quote!(#ty).to_string();
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|word| names.contains(&word))
}

/// Whether a field type is `Partial<…>` (its settled form is already optional).
fn is_partial(ty: &Type) -> bool {
    matches!(ty, Type::Path(tp) if tp.qself.is_none()
        && tp.path.segments.last().is_some_and(|s| s.ident == "Partial"))
}

struct NamedField<'a> {
    ident: &'a Ident,
    ty: &'a Type,
    wire: String,
    attrs: FieldAttrs,
    docs: Vec<&'a Attribute>,
}

fn named_fields(input: &DeriveInput) -> syn::Result<Vec<NamedField<'_>>> {
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new(
            input.span(),
            "`Spec` derives for structs with named fields",
        ));
    };
    let Fields::Named(fields) = &data.fields else {
        return Err(syn::Error::new(
            input.span(),
            "`Spec` derives for structs with named fields",
        ));
    };
    fields
        .named
        .iter()
        .map(|f| {
            let ident = f.ident.as_ref().expect("named field");
            Ok(NamedField {
                ident,
                ty: &f.ty,
                wire: camel(ident),
                attrs: field_attrs(&f.attrs)?,
                docs: docs(&f.attrs),
            })
        })
        .collect()
}

fn spec(input: &DeriveInput) -> syn::Result<Tokens> {
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new(
            input.generics.span(),
            "`Spec` does not support generic structs",
        ));
    }
    let attrs = struct_attrs(&input.attrs)?;
    let fields = named_fields(input)?;
    let name = &input.ident;
    let vis = &input.vis;
    let settled = format_ident!("{}Settled", name);
    let settled_doc = format!(
        "[`{name}`] after settling: every expression evaluated and every reference \
         replaced by the handle the cloud assigned. This is what a backend receives."
    );

    let idents: Vec<&Ident> = fields.iter().map(|f| f.ident).collect();
    let types: Vec<&Type> = fields.iter().map(|f| f.ty).collect();
    let wires: Vec<&String> = fields.iter().map(|f| &f.wire).collect();
    let settled_types: Vec<Tokens> = fields.iter().map(|f| settled_type(f.ty)).collect();
    let reported = format_ident!("{}Reported", name);
    let reported_doc = format!(
        "What a cloud reports of a [`{name}`]'s configuration: every field `Unknown` \
         unless the cloud said it. Never a sentinel: a field the cloud did not report \
         stays `Unknown`, and an unknown field is never drift."
    );
    let reported_types: Vec<Tokens> = fields
        .iter()
        .zip(&settled_types)
        .map(|(f, settled)| {
            if is_partial(f.ty) {
                settled.clone()
            } else {
                quote!(::infra_core::__private::Partial<#settled>)
            }
        })
        .collect();
    let lenient: Vec<Tokens> = fields
        .iter()
        .map(|f| {
            let ident = f.ident;
            if is_partial(f.ty) {
                quote!(::infra_core::__private::Settle::settle(&self.#ident, env).unwrap_or_default())
            } else {
                quote!(match ::infra_core::__private::Settle::settle(&self.#ident, env) {
                    ::core::result::Result::Ok(v) => ::infra_core::__private::Partial::Known(v),
                    ::core::result::Result::Err(_) => ::infra_core::__private::Partial::Unknown,
                })
            }
        })
        .collect();
    let field_docs: Vec<Tokens> = fields
        .iter()
        .map(|f| {
            let d = &f.docs;
            if d.is_empty() {
                let text = format!("Settled `{}`.", f.wire);
                quote!(#[doc = #text])
            } else {
                quote!(#(#d)*)
            }
        })
        .collect();
    let infos: Vec<Tokens> = fields
        .iter()
        .map(|f| {
            let wire = &f.wire;
            let repair = if f.attrs.replace {
                quote!(::infra_core::__private::Mutability::ForcesReplace)
            } else {
                quote!(::infra_core::__private::Mutability::Mutable)
            };
            let if_set = f.attrs.if_set;
            let instruction = match &f.attrs.instruction {
                Some(lit) => quote!(::core::option::Option::Some(#lit)),
                None => quote!(::core::option::Option::None),
            };
            // A set type compares as a set; so does a list the author marks `set`.
            let set = f.attrs.set || mentions(f.ty, &["BTreeSet", "HashSet"]);
            let sensitive = f.attrs.sensitive || mentions(f.ty, &["SecretString", "SecretSource"]);
            let replace_when = match &f.attrs.replace_when {
                Some(path) => quote!(::core::option::Option::Some(#path)),
                None => quote!(::core::option::Option::None),
            };
            quote!(::infra_core::__private::FieldInfo {
                name: #wire,
                mutability: #repair,
                compare_if_set: #if_set,
                instruction: #instruction,
                set: #set,
                sensitive: #sensitive,
                replace_when: #replace_when,
            },)
        })
        .collect();

    let refines_body = if idents.is_empty() {
        quote!(true)
    } else {
        quote!(#( ::infra_core::__private::Refines::refines(&self.#idents, &other.#idents) )&&*)
    };

    let core = quote! {
        #[doc = #settled_doc]
        #[derive(Clone, Debug, PartialEq)]
        #vis struct #settled {
            #( #field_docs pub #idents: #settled_types, )*
        }

        impl ::infra_core::__private::serde::Serialize for #settled {
            fn serialize<S>(&self, serializer: S) -> ::core::result::Result<S::Ok, S::Error>
            where
                S: ::infra_core::__private::serde::Serializer,
            {
                use ::infra_core::__private::serde::ser::SerializeMap as _;
                let mut map = serializer.serialize_map(::core::option::Option::None)?;
                #(
                    if !<#types as ::infra_core::__private::Field>::settled_is_unsaid(&self.#idents) {
                        map.serialize_entry(#wires, &self.#idents)?;
                    }
                )*
                map.end()
            }
        }

        #[doc = #reported_doc]
        #[derive(Clone, Debug, Default, PartialEq)]
        #vis struct #reported {
            #( #field_docs pub #idents: #reported_types, )*
        }

        impl ::infra_core::__private::serde::Serialize for #reported {
            fn serialize<S>(&self, serializer: S) -> ::core::result::Result<S::Ok, S::Error>
            where
                S: ::infra_core::__private::serde::Serializer,
            {
                use ::infra_core::__private::serde::ser::SerializeMap as _;
                let mut map = serializer.serialize_map(::core::option::Option::None)?;
                #(
                    if !self.#idents.is_unknown() {
                        map.serialize_entry(#wires, &self.#idents)?;
                    }
                )*
                map.end()
            }
        }

        impl ::infra_core::__private::serde::Serialize for #name {
            fn serialize<S>(&self, serializer: S) -> ::core::result::Result<S::Ok, S::Error>
            where
                S: ::infra_core::__private::serde::Serializer,
            {
                use ::infra_core::__private::serde::ser::SerializeMap as _;
                let mut map = serializer.serialize_map(::core::option::Option::None)?;
                #(
                    if !::infra_core::__private::Field::is_unsaid(&self.#idents) {
                        map.serialize_entry(#wires, &self.#idents)?;
                    }
                )*
                map.end()
            }
        }

        impl ::infra_core::__private::Refines for #name {
            fn refines(&self, other: &Self) -> bool {
                #refines_body
            }
        }

        impl ::infra_core::__private::Merge for #name {
            fn merge(&self, other: &Self) -> ::core::result::Result<Self, ::infra_core::__private::Conflict> {
                ::core::result::Result::Ok(Self {
                    #(
                        #idents: ::infra_core::__private::Merge::merge(&self.#idents, &other.#idents)
                            .map_err(|c| c.within(#wires))?,
                    )*
                })
            }
        }

        impl ::infra_core::__private::Field for #name {
            fn deps(&self, out: &mut ::std::vec::Vec<::infra_core::__private::Dep>) {
                #( ::infra_core::__private::Field::deps(&self.#idents, out); )*
                let _ = out;
            }
        }

        impl ::infra_core::__private::Settle for #name {
            type Settled = #settled;

            fn settle(
                &self,
                env: &dyn ::infra_core::__private::Env,
            ) -> ::core::result::Result<#settled, ::infra_core::__private::NotYet> {
                let mut not_yet = ::infra_core::__private::NotYet::default();
                #( let #idents = not_yet.take(::infra_core::__private::Settle::settle(&self.#idents, env)); )*
                let ( #( ::core::option::Option::Some(#idents), )* ) = ( #( #idents, )* ) else {
                    return ::core::result::Result::Err(not_yet);
                };
                let _ = env;
                ::core::result::Result::Ok(#settled { #( #idents, )* })
            }
        }

        impl ::infra_core::__private::Spec for #name {
            const FIELDS: &'static [::infra_core::__private::FieldInfo] = &[ #( #infos )* ];
            type Reported = #reported;

            fn settle_lenient(&self, env: &dyn ::infra_core::__private::Env) -> #reported {
                let _ = env;
                #reported { #( #idents: #lenient, )* }
            }
        }
    };

    let kind = match (&attrs.kind, &attrs.observed) {
        (Some(kind), Some(observed)) => {
            let check = attrs
                .check
                .as_ref()
                .map(|p| quote!(#p(self, problems);))
                .unwrap_or_default();
            let name_rule = attrs
                .name_rule
                .as_ref()
                .map(|p| quote!(fn check_name(name: &str) -> ::core::result::Result<(), ::std::string::String> { #p(name) }))
                .unwrap_or_default();
            quote! {
                impl ::infra_core::__private::Kind for #name {
                    const ID: &'static str = #kind;
                    type Observed = #observed;

                    fn check(&self, problems: &mut ::std::vec::Vec<::std::string::String>) {
                        #check
                        let _ = problems;
                    }

                    #name_rule
                }
            }
        }
        _ => Tokens::new(),
    };

    Ok(quote!(#core #kind))
}

fn sample_fields(fields: &Fields, build: Tokens) -> Tokens {
    let types: Vec<&Type> = fields.iter().map(|f| &f.ty).collect();
    let bindings: Vec<Ident> = (0..types.len()).map(|i| format_ident!("f{}", i)).collect();
    if types.is_empty() {
        let ctor = match fields {
            Fields::Named(_) => quote!(#build {}),
            Fields::Unnamed(_) => quote!(#build()),
            Fields::Unit => quote!(#build),
        };
        return quote!(::infra_core::testing::proptest::strategy::Strategy::boxed(
            ::infra_core::testing::proptest::strategy::Just(#ctor)
        ));
    }
    // Tuples of strategies stop at twelve; nest in chunks of six.
    let chunks: Vec<Tokens> = types
        .chunks(6)
        .map(|chunk| {
            let s = chunk
                .iter()
                .map(|t| quote!(<#t as ::infra_core::testing::Sample>::sample()));
            quote!(( #( #s, )* ))
        })
        .collect();
    let pats: Vec<Tokens> = bindings
        .chunks(6)
        .map(|chunk| quote!(( #( #chunk, )* )))
        .collect();
    let ctor = match fields {
        Fields::Named(named) => {
            let names = named.named.iter().map(|f| f.ident.as_ref().expect("named"));
            quote!(#build { #( #names: #bindings, )* })
        }
        Fields::Unnamed(_) => quote!(#build( #( #bindings, )* )),
        Fields::Unit => quote!(#build),
    };
    quote! {
        ::infra_core::testing::proptest::strategy::Strategy::boxed(
            ::infra_core::testing::proptest::strategy::Strategy::prop_map(
                ( #( #chunks, )* ),
                |( #( #pats, )* )| #ctor,
            )
        )
    }
}

/// Field by field: each field weakened on its own (a struct is below another when each
/// field is).
fn weaken_fields(fields: &Fields, name: &Ident) -> Tokens {
    let members: Vec<Tokens> = fields
        .iter()
        .enumerate()
        .map(|(i, f)| match &f.ident {
            Some(ident) => quote!(#ident),
            None => {
                let index = syn::Index::from(i);
                quote!(#index)
            }
        })
        .collect();
    let bindings: Vec<Ident> = (0..members.len())
        .map(|i| format_ident!("f{}", i))
        .collect();
    let chunks: Vec<Tokens> = members
        .chunks(6)
        .map(|chunk| {
            let s = chunk
                .iter()
                .map(|m| quote!(::infra_core::testing::Sample::weaken(&self.#m)));
            quote!(( #( #s, )* ))
        })
        .collect();
    let pats: Vec<Tokens> = bindings
        .chunks(6)
        .map(|chunk| quote!(( #( #chunk, )* )))
        .collect();
    quote! {
        fn weaken(&self) -> ::infra_core::testing::proptest::strategy::BoxedStrategy<Self> {
            ::infra_core::testing::proptest::strategy::Strategy::boxed(
                ::infra_core::testing::proptest::strategy::Strategy::prop_map(
                    ( #( #chunks, )* ),
                    |( #( #pats, )* )| #name { #( #members: #bindings, )* },
                )
            )
        }
    }
}

fn sample(input: &DeriveInput) -> syn::Result<Tokens> {
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new(
            input.generics.span(),
            "`Sample` does not support generic types",
        ));
    }
    let name = &input.ident;
    let body = match &input.data {
        Data::Struct(data) => sample_fields(&data.fields, quote!(#name)),
        Data::Enum(data) => {
            if data.variants.is_empty() {
                return Err(syn::Error::new(input.span(), "`Sample` needs a variant"));
            }
            let arms = data.variants.iter().map(|v| {
                let ident = &v.ident;
                sample_fields(&v.fields, quote!(#name::#ident))
            });
            quote! {
                ::infra_core::testing::proptest::strategy::Strategy::boxed(
                    ::infra_core::testing::proptest::strategy::Union::new(
                        ::std::vec![ #( #arms, )* ]
                    )
                )
            }
        }
        Data::Union(_) => {
            return Err(syn::Error::new(
                input.span(),
                "`Sample` does not derive for unions",
            ));
        }
    };
    let weaken = match &input.data {
        Data::Struct(data) if !data.fields.is_empty() => weaken_fields(&data.fields, name),
        _ => Tokens::new(),
    };
    Ok(quote! {
        impl ::infra_core::testing::Sample for #name {
            fn sample() -> ::infra_core::testing::proptest::strategy::BoxedStrategy<Self> {
                #body
            }

            #weaken
        }
    })
}
