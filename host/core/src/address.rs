//! One classifier of IP addresses for every door that decides where the
//! host may connect: a gadget's HTTP grants (an internal address is
//! reached only when granted by address), the upstream OAuth client (an
//! authorization server may be near only when the MCP server is), and the
//! JWKS fetch (never link-local or reserved). One list, so the doors
//! cannot disagree about what, say, `169.254.169.254` is.

use std::net::{IpAddr, Ipv6Addr};

/// Where an address is, as far as who may be sent there goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    /// On the public internet.
    Public,
    /// This machine (`127.0.0.0/8`, `::1`).
    Loopback,
    /// A private network: RFC 1918, shared address space (CGNAT,
    /// `100.64.0.0/10`), IPv6 unique local (`fc00::/7`).
    Private,
    /// Link-local (`169.254.0.0/16`, `fe80::/10`): where clouds serve
    /// instance metadata and credentials.
    LinkLocal,
    /// Never a server: unspecified, multicast, broadcast, documentation,
    /// benchmarking, `0.0.0.0/8`, `240.0.0.0/4`, IETF protocol
    /// assignments, deprecated site-local, the NAT64 prefix itself.
    Reserved,
}

impl AddressClass {
    /// Whether a name on the public internet should never make the host
    /// connect here (everything but [`AddressClass::Public`]).
    pub fn is_internal(self) -> bool {
        self != AddressClass::Public
    }

    /// Whether no request of the host's own (metadata, keys) may go
    /// here, whoever asks: link-local and reserved addresses.
    pub fn is_forbidden(self) -> bool {
        matches!(self, AddressClass::LinkLocal | AddressClass::Reserved)
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
pub fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// The class of `address` (an IPv4-mapped IPv6 address is classed as
/// the IPv4 address it maps).
pub fn classify(address: IpAddr) -> AddressClass {
    match canonical(address) {
        IpAddr::V4(a) => {
            let [b0, b1, b2, _] = a.octets();
            if a.is_loopback() {
                AddressClass::Loopback
            } else if a.is_link_local() {
                AddressClass::LinkLocal
            } else if a.is_private() || (b0 == 100 && (64..128).contains(&b1)) {
                AddressClass::Private
            } else if a.is_unspecified()
                || a.is_multicast()
                || a.is_broadcast()
                || a.is_documentation()
                || b0 == 0
                || (b0 == 192 && b1 == 0 && b2 == 0)
                || (b0 == 198 && (18..20).contains(&b1))
                || b0 >= 240
            {
                AddressClass::Reserved
            } else {
                AddressClass::Public
            }
        }
        IpAddr::V6(a) => {
            let first = a.segments()[0];
            if a.is_loopback() {
                AddressClass::Loopback
            } else if (first & 0xffc0) == 0xfe80 {
                AddressClass::LinkLocal
            } else if (first & 0xfe00) == 0xfc00 {
                AddressClass::Private
            } else if a.is_unspecified()
                || a.is_multicast()
                || (first & 0xffc0) == 0xfec0
                || a == Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0)
                || (first == 0x2001 && a.segments()[1] == 0xdb8)
            {
                AddressClass::Reserved
            } else {
                AddressClass::Public
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_door_classes_an_address_the_same_way() {
        let class = |a: &str| classify(a.parse().unwrap());
        for (address, expected) in [
            ("127.0.0.1", AddressClass::Loopback),
            ("::1", AddressClass::Loopback),
            ("::ffff:127.0.0.1", AddressClass::Loopback),
            ("10.1.2.3", AddressClass::Private),
            ("172.16.0.1", AddressClass::Private),
            ("192.168.1.1", AddressClass::Private),
            ("100.64.0.1", AddressClass::Private),
            ("fd00::1", AddressClass::Private),
            ("169.254.169.254", AddressClass::LinkLocal),
            ("::ffff:169.254.169.254", AddressClass::LinkLocal),
            ("fe80::1", AddressClass::LinkLocal),
            ("0.0.0.0", AddressClass::Reserved),
            ("::", AddressClass::Reserved),
            ("224.0.0.1", AddressClass::Reserved),
            ("255.255.255.255", AddressClass::Reserved),
            ("192.0.2.1", AddressClass::Reserved),
            ("198.18.0.1", AddressClass::Reserved),
            ("240.0.0.1", AddressClass::Reserved),
            ("2001:db8::1", AddressClass::Reserved),
            ("8.8.8.8", AddressClass::Public),
            ("2606:4700::1111", AddressClass::Public),
            ("100.128.0.1", AddressClass::Public),
        ] {
            assert_eq!(class(address), expected, "{address}");
        }
        assert!(AddressClass::LinkLocal.is_forbidden() && AddressClass::Private.is_internal());
        assert!(!AddressClass::Loopback.is_forbidden() && !AddressClass::Public.is_internal());
    }
}
