//! The browser's one way out of its network namespace: a SOCKS5 proxy (RFC 1928) whose listener
//! is made inside the namespace and whose connections are made from the host's (to the tests'
//! servers on its loopback, and to the clusters' addresses it routes).
//!
//! Hand-written rather than a crate: Chromium needs CONNECT without authentication, two short
//! messages each way before the bytes flow, about 60 lines here. The crates that serve it bring
//! more than that: fast-socks5 (MIT) brings thiserror 1, async-trait, anyhow, socket2 0.5 and
//! tokio-stream beside the workspace's own versions, compiled on every cold run;
//! socks5-server is GPL-3.0, which this Apache-2.0 tree does not take.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const VERSION: u8 = 5;
const NO_AUTHENTICATION: u8 = 0;
const NO_ACCEPTABLE_METHOD: u8 = 0xff;
const CONNECT: u8 = 1;
const IPV4: u8 = 1;
const DOMAIN_NAME: u8 = 3;
const IPV6: u8 = 4;

/// The replies (RFC 1928 §6) this proxy gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reply {
    Succeeded = 0,
    NotAllowed = 2,
    Refused = 5,
    CommandNotSupported = 7,
    AddressTypeNotSupported = 8,
}

/// Where a CONNECT asks to go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    Ip(IpAddr),
    Name(String),
}

/// The addresses `target` may be reached at: any address (the tests' servers on the host's
/// loopback, a cluster's Services and nodes, which the host routes to), and of names only
/// `localhost`. Chromium's own requests to the internet go by name and are refused without a
/// lookup, as they failed when the browser shared the host's network and this machine had no
/// route out.
pub(crate) fn allowed(target: &Target, port: u16) -> Result<Vec<SocketAddr>, Reply> {
    match target {
        Target::Ip(ip) => Ok(vec![SocketAddr::new(*ip, port)]),
        Target::Name(name) if name.eq_ignore_ascii_case("localhost") => {
            Ok(vec![(Ipv4Addr::LOCALHOST, port).into(), (Ipv6Addr::LOCALHOST, port).into()])
        }
        Target::Name(_) => Err(Reply::NotAllowed),
    }
}

/// Serve every connection to `listener` until the task is dropped.
pub(crate) async fn serve(listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((client, _)) => {
                // A connection that fails ends alone; the browser sees it closed.
                tokio::spawn(async move { drop(relay(client).await) });
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
            Err(_) => return,
        }
    }
}

/// One connection: the greeting, the request, then the bytes both ways.
pub(crate) async fn relay<C: AsyncRead + AsyncWrite + Unpin>(mut client: C) -> io::Result<()> {
    let mut greeting = [0u8; 2];
    client.read_exact(&mut greeting).await?;
    // At most 255 methods: the count is one byte.
    let mut methods = vec![0u8; usize::from(greeting[1])];
    client.read_exact(&mut methods).await?;
    if greeting[0] != VERSION || !methods.contains(&NO_AUTHENTICATION) {
        return client.write_all(&[VERSION, NO_ACCEPTABLE_METHOD]).await;
    }
    client.write_all(&[VERSION, NO_AUTHENTICATION]).await?;
    let addresses = read_request(&mut client).await?.and_then(|(target, port)| allowed(&target, port));
    let upstream = match addresses {
        Ok(addresses) => TcpStream::connect(&addresses[..]).await.map_err(|_| Reply::Refused),
        Err(reply) => Err(reply),
    };
    let mut upstream = match upstream {
        Ok(upstream) => upstream,
        Err(reply) => return answer(&mut client, reply).await,
    };
    answer(&mut client, Reply::Succeeded).await?;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await.map(drop)
}

/// Where a CONNECT goes and to which port, or the reply refusing it.
pub(crate) type Request = Result<(Target, u16), Reply>;

/// The request after the greeting: `VER CMD RSV ATYP DST.ADDR DST.PORT`. `Err(reply)` when it
/// asks for what this proxy does not do.
pub(crate) async fn read_request<R: AsyncRead + Unpin>(from: &mut R) -> io::Result<Request> {
    let mut head = [0u8; 4];
    from.read_exact(&mut head).await?;
    let [version, command, _reserved, kind] = head;
    let target = match kind {
        IPV4 => {
            let mut ip = [0u8; 4];
            from.read_exact(&mut ip).await?;
            Target::Ip(IpAddr::from(ip))
        }
        IPV6 => {
            let mut ip = [0u8; 16];
            from.read_exact(&mut ip).await?;
            Target::Ip(IpAddr::from(ip))
        }
        DOMAIN_NAME => {
            // At most 255 bytes: the length is one byte.
            let length = from.read_u8().await?;
            let mut name = vec![0u8; usize::from(length)];
            from.read_exact(&mut name).await?;
            let name = String::from_utf8_lossy(&name).into_owned();
            // Chromium sends every host as a name, an address too ("127.0.0.1").
            name.parse().map_or(Target::Name(name), Target::Ip)
        }
        _ => return Ok(Err(Reply::AddressTypeNotSupported)),
    };
    let port = from.read_u16().await?;
    if version != VERSION || command != CONNECT {
        return Ok(Err(Reply::CommandNotSupported));
    }
    Ok(Ok((target, port)))
}

/// `VER REP RSV ATYP BND.ADDR BND.PORT`, the bound address left at 0.0.0.0:0 (Chromium does
/// not read it).
async fn answer<W: AsyncWrite + Unpin>(to: &mut W, reply: Reply) -> io::Result<()> {
    to.write_all(&[VERSION, reply as u8, 0, IPV4, 0, 0, 0, 0, 0, 0]).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn addresses_and_localhost_are_reachable_other_names_are_not() {
        let v4 = Target::Ip(Ipv4Addr::LOCALHOST.into());
        let v4_other = Target::Ip(Ipv4Addr::new(127, 0, 0, 2).into());
        let v6 = Target::Ip(Ipv6Addr::LOCALHOST.into());
        let cases: [(Target, Result<Vec<SocketAddr>, Reply>); 8] = [
            (v4, Ok(vec![([127, 0, 0, 1], 443).into()])),
            (v4_other, Ok(vec![([127, 0, 0, 2], 443).into()])),
            (v6, Ok(vec![(Ipv6Addr::LOCALHOST, 443).into()])),
            (
                Target::Name("LocalHost".into()),
                Ok(vec![(Ipv4Addr::LOCALHOST, 443).into(), (Ipv6Addr::LOCALHOST, 443).into()]),
            ),
            (Target::Ip(Ipv4Addr::new(10, 215, 0, 220).into()), Ok(vec![([10, 215, 0, 220], 443).into()])),
            (Target::Name("myownshell.example".into()), Err(Reply::NotAllowed)),
            (Target::Name("clients2.google.com".into()), Err(Reply::NotAllowed)),
            (Target::Name("localhost.example".into()), Err(Reply::NotAllowed)),
        ];
        for (target, expected) in cases {
            assert_eq!(allowed(&target, 443), expected, "{target:?}");
        }
    }

    #[tokio::test]
    async fn requests_are_read_as_rfc_1928_writes_them() {
        let mut name = vec![5, 1, 0, 3, 9];
        name.extend_from_slice(b"localhost");
        name.extend_from_slice(&[0x1f, 0x90]);
        let mut address_as_name = vec![5, 1, 0, 3, 9];
        address_as_name.extend_from_slice(b"127.0.0.1");
        address_as_name.extend_from_slice(&[0, 80]);
        let mut v6 = vec![5, 1, 0, 4];
        v6.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
        v6.extend_from_slice(&[0, 80]);
        let cases: [(&str, Vec<u8>, Request); 7] = [
            ("IPv4", vec![5, 1, 0, 1, 127, 0, 0, 1, 0x01, 0xbb], Ok((Target::Ip([127, 0, 0, 1].into()), 443))),
            ("a name", name, Ok((Target::Name("localhost".into()), 8080))),
            ("an address as a name", address_as_name, Ok((Target::Ip([127, 0, 0, 1].into()), 80))),
            ("IPv6", v6, Ok((Target::Ip(Ipv6Addr::LOCALHOST.into()), 80))),
            ("BIND", vec![5, 2, 0, 1, 127, 0, 0, 1, 0, 80], Err(Reply::CommandNotSupported)),
            ("SOCKS4's version", vec![4, 1, 0, 1, 127, 0, 0, 1, 0, 80], Err(Reply::CommandNotSupported)),
            ("an unknown address type", vec![5, 1, 0, 9], Err(Reply::AddressTypeNotSupported)),
        ];
        for (what, bytes, expected) in cases {
            assert_eq!(read_request(&mut bytes.as_slice()).await.unwrap(), expected, "{what}");
        }
        let cut = [5u8, 1, 0, 1, 127, 0];
        assert!(read_request(&mut cut.as_slice()).await.is_err(), "a request cut short is an error");
    }

    /// A whole CONNECT to an echo server on the loopback, and one refused for a name.
    #[tokio::test]
    async fn a_connect_to_the_loopback_carries_bytes_both_ways_and_a_name_is_refused() {
        let echo = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let port = echo.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut conn, _) = echo.accept().await.unwrap();
            let (mut read, mut write) = conn.split();
            tokio::io::copy(&mut read, &mut write).await.unwrap();
        });
        let (mut browser, proxy_side) = tokio::io::duplex(1024);
        let proxy = tokio::spawn(relay(proxy_side));
        browser.write_all(&[5, 2, 2, 0]).await.unwrap();
        let mut chosen = [0u8; 2];
        browser.read_exact(&mut chosen).await.unwrap();
        assert_eq!(chosen, [5, 0], "no authentication chosen");
        let [high, low] = port.to_be_bytes();
        browser.write_all(&[5, 1, 0, 1, 127, 0, 0, 1, high, low]).await.unwrap();
        let mut reply = [0u8; 10];
        browser.read_exact(&mut reply).await.unwrap();
        assert_eq!(reply[..2], [5, 0], "succeeded");
        browser.write_all(b"hello").await.unwrap();
        let mut echoed = [0u8; 5];
        browser.read_exact(&mut echoed).await.unwrap();
        assert_eq!(&echoed, b"hello");
        drop(browser);
        proxy.await.unwrap().unwrap();

        let (mut browser, proxy_side) = tokio::io::duplex(1024);
        tokio::spawn(relay(proxy_side));
        let mut name = vec![5, 1, 0, 5, 1, 0, 3, 19];
        name.extend_from_slice(b"clients2.google.com");
        name.extend_from_slice(&[1, 187]);
        browser.write_all(&name).await.unwrap();
        let mut answer = [0u8; 12];
        browser.read_exact(&mut answer).await.unwrap();
        assert_eq!(answer[..4], [5, 0, 5, 2], "the method chosen, then not allowed");

        let (mut browser, proxy_side) = tokio::io::duplex(1024);
        tokio::spawn(relay(proxy_side));
        browser.write_all(&[5, 1, 2]).await.unwrap();
        let mut refused = [0u8; 2];
        browser.read_exact(&mut refused).await.unwrap();
        assert_eq!(refused, [5, 0xff], "only username/password offered: no acceptable method");
    }
}
