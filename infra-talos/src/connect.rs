//! One mutual-TLS gRPC channel per node, addressed by the node's own endpoint.

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::talosconfig::Credentials;

/// The Talos API port.
pub const DEFAULT_PORT: u16 = 50000;

/// A node's address: host (IP address or name) and port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeAddress {
    host: String,
    port: u16,
}

/// An address that is not `host`, `host:port`, `[v6]:port` or
/// `https://host[:port]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{address:?} is not a node address ({reason})")]
pub struct AddressError {
    /// The text given.
    pub address: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl NodeAddress {
    /// A node at `host` and `port`.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        NodeAddress {
            host: host.into(),
            port,
        }
    }

    /// Parses `host`, `host:port`, an IPv6 address (bracketed when a port follows),
    /// or `https://host[:port]`; the port defaults to [`DEFAULT_PORT`].
    pub fn parse(text: &str) -> Result<Self, AddressError> {
        let error = |reason| AddressError {
            address: text.to_owned(),
            reason,
        };
        let rest = text.trim();
        let rest = match rest.split_once("://") {
            Some(("https", rest)) => rest,
            Some(_) => return Err(error("only https is spoken to a node")),
            None => rest,
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.is_empty() {
            return Err(error("empty"));
        }
        if rest.parse::<IpAddr>().is_ok() {
            return Ok(NodeAddress::new(rest, DEFAULT_PORT));
        }
        let (host, port) = if let Some(bracketed) = rest.strip_prefix('[') {
            let (host, after) = bracketed
                .split_once(']')
                .ok_or_else(|| error("unclosed bracket"))?;
            match after {
                "" => (host, None),
                _ => (
                    host,
                    Some(
                        after
                            .strip_prefix(':')
                            .ok_or_else(|| error("junk after the bracketed address"))?,
                    ),
                ),
            }
        } else {
            match rest.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (rest, None),
            }
        };
        if host.is_empty() || host.contains(['/', ' ', '@', '[', ']']) {
            return Err(error("bad host"));
        }
        let port = match port {
            Some(port) => port.parse().map_err(|_| error("bad port"))?,
            None => DEFAULT_PORT,
        };
        Ok(NodeAddress::new(host, port))
    }

    /// The host.
    #[must_use]
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The endpoint URI, `https://host:port` (IPv6 bracketed).
    #[must_use]
    pub fn uri(&self) -> String {
        format!("https://{self}")
    }
}

impl fmt::Display for NodeAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Timeouts and TLS naming of a node channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectOptions {
    /// How long establishing the connection (TCP and TLS) may take.
    pub connect_timeout: Duration,
    /// How long a read may take (observation); an apply's deadline comes from its
    /// committed attempt instead.
    pub call_deadline: Duration,
    /// The name the node's server certificate must carry; the node's host when
    /// `None`.
    pub tls_server_name: Option<String>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            connect_timeout: Duration::from_secs(5),
            call_deadline: Duration::from_secs(10),
            tls_server_name: None,
        }
    }
}

/// Why a channel could not be set up (nothing was sent).
#[derive(Debug, thiserror::Error)]
#[error("cannot set up the connection to node {address}: {detail}")]
pub struct ConnectError {
    /// The node.
    pub address: String,
    /// What went wrong.
    pub detail: String,
}

/// A mutual-TLS gRPC channel to one node. It connects on first use and reconnects
/// after a connection breaks. It exposes no calls of its own: it is handed to an
/// [`ObservationClient`](crate::ObservationClient) or a
/// [`DispatchClient`](crate::DispatchClient).
#[derive(Clone)]
pub struct NodeChannel {
    pub(crate) channel: Channel,
    pub(crate) address: NodeAddress,
    pub(crate) call_deadline: Duration,
}

impl fmt::Debug for NodeChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeChannel")
            .field("address", &self.address)
            .field("call_deadline", &self.call_deadline)
            .finish_non_exhaustive()
    }
}

impl NodeChannel {
    /// Sets up the channel to `address` with `credentials`. Nothing is sent yet; an
    /// unreachable node shows in the calls made through the channel.
    pub async fn open(
        credentials: &Credentials,
        address: &NodeAddress,
        options: &ConnectOptions,
    ) -> Result<Self, ConnectError> {
        let failed = |detail: String| ConnectError {
            address: address.to_string(),
            detail,
        };
        let server_name = options
            .tls_server_name
            .clone()
            .unwrap_or_else(|| address.host().to_owned());
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&credentials.ca_pem))
            .identity(Identity::from_pem(
                &credentials.crt_pem,
                &credentials.key_pem,
            ))
            .domain_name(server_name)
            .timeout(options.connect_timeout);
        let endpoint = Endpoint::from_shared(address.uri())
            .map_err(|error| failed(format!("bad endpoint URI: {error}")))?
            .connect_timeout(options.connect_timeout)
            .tcp_nodelay(true)
            .tls_config(tls)
            .map_err(|error| failed(format!("TLS setup failed: {error}")))?;
        Ok(NodeChannel {
            channel: endpoint.connect_lazy(),
            address: address.clone(),
            call_deadline: options.call_deadline,
        })
    }

    /// The node's address.
    #[must_use]
    pub fn address(&self) -> &NodeAddress {
        &self.address
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_node_addresses() {
        let parse = |text| NodeAddress::parse(text).map(|a| (a.host().to_owned(), a.port()));
        assert_eq!(parse("10.0.0.2"), Ok(("10.0.0.2".into(), DEFAULT_PORT)));
        assert_eq!(parse("10.0.0.2:50001"), Ok(("10.0.0.2".into(), 50001)));
        assert_eq!(parse("https://node-a:443/"), Ok(("node-a".into(), 443)));
        assert_eq!(parse("fd00::1"), Ok(("fd00::1".into(), DEFAULT_PORT)));
        assert_eq!(parse("[fd00::1]:7"), Ok(("fd00::1".into(), 7)));
        assert_eq!(parse("[fd00::1]"), Ok(("fd00::1".into(), DEFAULT_PORT)));
        let refused = |text: &str| NodeAddress::parse(text).unwrap_err().to_string();
        assert_eq!(
            refused("http://10.0.0.2"),
            "\"http://10.0.0.2\" is not a node address (only https is spoken to a node)"
        );
        assert!(
            refused("10.0.0.2:port").starts_with("\"10.0.0.2:port\" is not a node address ("),
            "{}",
            refused("10.0.0.2:port")
        );
        assert_eq!(refused(""), "\"\" is not a node address (empty)");
        assert_eq!(
            NodeAddress::parse("fd00::1").map(|a| a.uri()),
            Ok("https://[fd00::1]:50000".to_owned())
        );
    }
}
