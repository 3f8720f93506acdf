//! Which clients count as one: an IPv4 address (or its network, `ipv4_prefix`), an IPv6
//! network (`ipv6_prefix`, a /64 by default: one host is given a whole /64 and may use
//! any address in it). IPv4-mapped IPv6 addresses are IPv4.

use std::net::IpAddr;

/// The counting key of `ip`: the address with the bits past its prefix cleared, IPv4 as
/// its mapped IPv6 form (so the two families never share a key).
pub fn of(ip: IpAddr, ipv4_prefix: u8, ipv6_prefix: u8) -> u128 {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    match ip {
        IpAddr::V4(v4) => {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(ipv4_prefix))
                .unwrap_or(0);
            0xffff_u128 << 32 | u128::from(u32::from(v4) & mask)
        }
        IpAddr::V6(v6) => {
            let mask = u128::MAX
                .checked_shl(128 - u32::from(ipv6_prefix))
                .unwrap_or(0);
            u128::from(v6) & mask
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ip: &str, v4: u8, v6: u8) -> u128 {
        of(ip.parse().unwrap(), v4, v6)
    }

    #[test]
    fn a_host_rotating_through_its_64_is_one_client() {
        assert_eq!(
            key("2001:db8:1:2::1", 32, 64),
            key("2001:db8:1:2:ffff::9", 32, 64)
        );
        assert_ne!(
            key("2001:db8:1:2::1", 32, 64),
            key("2001:db8:1:3::1", 32, 64)
        );
        assert_ne!(
            key("2001:db8:1:2::1", 32, 128),
            key("2001:db8:1:2::2", 32, 128)
        );
    }

    #[test]
    fn ipv4_is_per_address_unless_grouped() {
        assert_ne!(key("192.0.2.1", 32, 64), key("192.0.2.2", 32, 64));
        assert_eq!(key("192.0.2.1", 24, 64), key("192.0.2.200", 24, 64));
        assert_eq!(key("::ffff:192.0.2.1", 32, 64), key("192.0.2.1", 32, 64));
        // An IPv4 client and the IPv6 network ::/64 are not the same key.
        assert_ne!(key("0.0.0.1", 32, 64), key("::1", 32, 64));
        assert_eq!(key("10.9.8.7", 0, 64), key("192.0.2.1", 0, 64));
    }
}
