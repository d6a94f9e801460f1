//! A network namespace of a trial's own, for an external harness: only a
//! loopback, on which ablate's gateway listens. The jail joins this namespace
//! instead of an empty one, so the harness reaches the gateway at
//! 127.0.0.1:PORT and nothing else: not the model server, not the host's
//! loopback, not the outside. Needs root (CAP_SYS_ADMIN) to create and join.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

/// The port the gateway listens on inside the namespace: Ollama's, so that
/// Ollama clients with default settings find it.
pub const GATEWAY_PORT: u16 = 11434;

pub struct TrialNet {
    ns: OwnedFd,
    /// Bound to 127.0.0.1:GATEWAY_PORT inside the namespace (a socket keeps
    /// the namespace it was made in).
    pub listener: std::net::TcpListener,
}

impl TrialNet {
    /// A new namespace with loopback up and the gateway's listener bound in it.
    pub fn create() -> std::io::Result<TrialNet> {
        // unshare(CLONE_NEWNET) changes the calling thread's namespace: do it on
        // a thread of its own, which ends right after.
        std::thread::spawn(|| -> std::io::Result<TrialNet> {
            // SAFETY: plain syscall; affects only this short-lived thread.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let ns: OwnedFd = File::open("/proc/thread-self/ns/net")?.into();
            loopback_up()?;
            let listener = std::net::TcpListener::bind(("127.0.0.1", GATEWAY_PORT))?;
            Ok(TrialNet { ns, listener })
        })
        .join()
        .map_err(|_| std::io::Error::other("the namespace thread panicked"))?
    }

    /// The namespace of a running process (a trial's container, whose engine
    /// made it with nothing but a loopback), with the gateway's listener bound
    /// in it: what runs in the container reaches the gateway at
    /// 127.0.0.1:GATEWAY_PORT.
    pub fn inside(pid: u32) -> std::io::Result<TrialNet> {
        let ns: OwnedFd = File::open(format!("/proc/{pid}/ns/net"))?.into();
        let fd = ns.try_clone()?;
        // setns changes the calling thread's namespace: on a thread of its own.
        let listener = std::thread::spawn(move || -> std::io::Result<std::net::TcpListener> {
            join(fd.as_fd())?;
            loopback_up()?;
            std::net::TcpListener::bind(("127.0.0.1", GATEWAY_PORT))
        })
        .join()
        .map_err(|_| std::io::Error::other("the namespace thread panicked"))??;
        Ok(TrialNet { ns, listener })
    }

    /// For `setns` in the jail's child before exec.
    pub fn fd(&self) -> RawFd {
        self.ns.as_raw_fd()
    }
}

/// `ip link set lo up`, by ioctl on a socket of the current namespace.
fn loopback_up() -> std::io::Result<()> {
    // struct ifreq: 16 bytes of name, then a union whose first member here is the flags (short).
    #[repr(C)]
    struct IfReq {
        name: [u8; 16],
        flags: libc::c_short,
        _pad: [u8; 22],
    }
    const SIOCGIFFLAGS: libc::c_ulong = 0x8913;
    const SIOCSIFFLAGS: libc::c_ulong = 0x8914;
    // SAFETY: a datagram socket used only for the two ioctls, closed below.
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if sock < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut req = IfReq { name: [0; 16], flags: 0, _pad: [0; 22] };
    req.name[..2].copy_from_slice(b"lo");
    // SAFETY: req is a valid ifreq-sized buffer for both ioctls.
    let result = unsafe {
        if libc::ioctl(sock, SIOCGIFFLAGS as _, &mut req) != 0 {
            Err(std::io::Error::last_os_error())
        } else {
            req.flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            if libc::ioctl(sock, SIOCSIFFLAGS as _, &req) != 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(())
            }
        }
    };
    // SAFETY: closing the socket opened above.
    unsafe { libc::close(sock) };
    result
}

/// Join the namespace `fd` (in a forked child before exec).
pub fn join(fd: BorrowedFd<'_>) -> std::io::Result<()> {
    // setns is one system call (async-signal-safe).
    rustix::thread::move_into_link_name_space(fd, Some(rustix::thread::LinkNameSpaceType::Network))
        .map_err(std::io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{ErrorKind, Read, Write};
    use std::time::{Duration, Instant};

    /// How long any step of the test may wait: every wait below has this bound, so a
    /// connection that never comes fails the test instead of hanging it.
    const PATIENCE: Duration = Duration::from_secs(5);

    #[test]
    fn the_listener_lives_in_a_namespace_of_its_own() {
        if !crate::sandbox::isolation::is_root() {
            eprintln!(
                "SKIPPED the_listener_lives_in_a_namespace_of_its_own: creating a network namespace needs root"
            );
            return;
        }
        let net = TrialNet::create().unwrap();
        assert_eq!(net.listener.local_addr().unwrap().port(), GATEWAY_PORT);
        // From the host's namespace nothing listens there (or something else does).
        let host = std::net::TcpStream::connect_timeout(
            &"127.0.0.1:11434".parse().unwrap(),
            Duration::from_millis(200),
        );
        if let Ok(mut s) = host {
            // Something of the host's own: our listener must not see it.
            let _ = s.write_all(b"x");
        }
        net.listener.set_nonblocking(true).unwrap();
        let first = net.listener.accept();
        assert!(
            matches!(&first, Err(e) if e.kind() == ErrorKind::WouldBlock),
            "a host connection reached the namespace's listener: {first:?}"
        );
        // A child that joins the namespace reaches it.
        let fd = net.fd();
        let mut child = std::process::Command::new("python3");
        child.args(["-c", "import socket; s = socket.create_connection(('127.0.0.1', 11434), timeout=5); s.sendall(b'hello')"]);
        // SAFETY: pre_exec runs setns only; `net` keeps the fd open while the child starts.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut child, move || {
                join(BorrowedFd::borrow_raw(fd))
            });
        }
        let mut child = child.spawn().unwrap();
        let deadline = Instant::now() + 2 * PATIENCE;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the child did not finish within {:?}", 2 * PATIENCE);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "{status}");
        // The listener stays nonblocking: poll accept() until the deadline.
        let deadline = Instant::now() + PATIENCE;
        let mut conn = loop {
            match net.listener.accept() {
                Ok((conn, _)) => break conn,
                Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) => panic!("no connection from the namespace within {PATIENCE:?}: {e}"),
            }
        };
        conn.set_nonblocking(false).unwrap();
        conn.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut buf = String::new();
        conn.read_to_string(&mut buf).unwrap();
        assert_eq!(buf, "hello");
    }
}
