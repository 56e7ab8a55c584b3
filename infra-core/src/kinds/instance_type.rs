//! EC2 instance types, as a family and a size that family actually comes in.
//!
//! ```
//! use infra_core::kinds::{Gen6Size, InstanceType};
//! let _ = InstanceType::M6i(Gen6Size::X32large);
//! ```
//!
//! ```compile_fail
//! use infra_core::kinds::{InstanceType, BurstableSize};
//! // t3 has no 32xlarge: the size enum of a burstable family does not list it.
//! let _ = InstanceType::T3(BurstableSize::X32large);
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[cfg(any(test, feature = "testing"))]
use infra_derive::Sample;

macro_rules! sizes {
    ($(#[$meta:meta])* $name:ident { $( $variant:ident => $code:literal ),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[cfg_attr(any(test, feature = "testing"), derive(Sample))]
        pub enum $name {
            $( #[doc = concat!("`", $code, "`")] $variant, )*
        }

        impl $name {
            /// The size as EC2 spells it.
            pub fn code(&self) -> &'static str {
                match self { $( $name::$variant => $code, )* }
            }

            /// Every size of the family.
            pub const ALL: &'static [$name] = &[ $( $name::$variant, )* ];

            fn parse(code: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|s| s.code() == code)
            }
        }
    };
}

sizes!(
    /// Sizes of the burstable families (t3, t3a, t4g).
    BurstableSize { Nano => "nano", Micro => "micro", Small => "small", Medium => "medium",
        Large => "large", Xlarge => "xlarge", X2large => "2xlarge" }
);
sizes!(
    /// Sizes of the fifth-generation general purpose and memory families (m5, r5).
    Gen5Size { Large => "large", Xlarge => "xlarge", X2large => "2xlarge", X4large => "4xlarge",
        X8large => "8xlarge", X12large => "12xlarge", X16large => "16xlarge",
        X24large => "24xlarge", Metal => "metal" }
);
sizes!(
    /// Sizes of the c5 family.
    C5Size { Large => "large", Xlarge => "xlarge", X2large => "2xlarge", X4large => "4xlarge",
        X9large => "9xlarge", X12large => "12xlarge", X18large => "18xlarge",
        X24large => "24xlarge", Metal => "metal" }
);
sizes!(
    /// Sizes of the sixth-generation Intel families (m6i, c6i, r6i).
    Gen6Size { Large => "large", Xlarge => "xlarge", X2large => "2xlarge", X4large => "4xlarge",
        X8large => "8xlarge", X12large => "12xlarge", X16large => "16xlarge",
        X24large => "24xlarge", X32large => "32xlarge", Metal => "metal" }
);
sizes!(
    /// Sizes of the m7g family.
    M7gSize { Medium => "medium", Large => "large", Xlarge => "xlarge", X2large => "2xlarge",
        X4large => "4xlarge", X8large => "8xlarge", X12large => "12xlarge",
        X16large => "16xlarge", Metal => "metal" }
);

macro_rules! families {
    ($( $variant:ident($size:ident) => $code:literal ),* $(,)?) => {
        /// An EC2 instance type: a family, and one of the sizes it comes in.
        ///
        /// Serialises as EC2 spells it (`t3.micro`); [`FromStr`] refuses a family or a
        /// size that does not exist.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[cfg_attr(any(test, feature = "testing"), derive(Sample))]
        pub enum InstanceType {
            $( #[doc = concat!("The `", $code, "` family.")] $variant($size), )*
        }

        impl InstanceType {
            /// The family's name (`t3`).
            pub fn family(&self) -> &'static str {
                match self { $( InstanceType::$variant(_) => $code, )* }
            }

            /// The size's name (`micro`).
            pub fn size(&self) -> &'static str {
                match self { $( InstanceType::$variant(s) => s.code(), )* }
            }

            /// Every family this crate knows, with its sizes.
            pub fn families() -> Vec<(&'static str, Vec<&'static str>)> {
                vec![ $( ($code, $size::ALL.iter().map(|s| s.code()).collect()), )* ]
            }
        }

        impl FromStr for InstanceType {
            type Err = String;

            fn from_str(text: &str) -> Result<Self, String> {
                let (family, size) = text
                    .split_once('.')
                    .ok_or_else(|| format!("{text:?} is not `family.size`"))?;
                match family {
                    $( $code => $size::parse(size).map(InstanceType::$variant).ok_or_else(|| format!(
                        "the {family} family has no size {size:?} (it has {})",
                        $size::ALL.iter().map(|s| s.code()).collect::<Vec<_>>().join(", ")
                    )), )*
                    _ => Err(format!("unknown instance family {family:?}")),
                }
            }
        }
    };
}

families!(
    T3(BurstableSize) => "t3",
    T3a(BurstableSize) => "t3a",
    T4g(BurstableSize) => "t4g",
    M5(Gen5Size) => "m5",
    R5(Gen5Size) => "r5",
    C5(C5Size) => "c5",
    M6i(Gen6Size) => "m6i",
    C6i(Gen6Size) => "c6i",
    R6i(Gen6Size) => "r6i",
    M7g(M7gSize) => "m7g",
);

impl fmt::Display for InstanceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.family(), self.size())
    }
}

impl Serialize for InstanceType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for InstanceType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}
