//! Accepted connections the simulator can cut on purpose (to lose a response).

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// Cuts one connection: once pulled, every read and write fails, so the server
/// drops the connection without answering what is in flight.
#[derive(Debug, Default)]
pub(crate) struct KillSwitch {
    killed: AtomicBool,
    wakers: Mutex<[Option<Waker>; 2]>,
}

impl KillSwitch {
    pub(crate) fn pull(&self) {
        self.killed.store(true, Ordering::SeqCst);
        let wakers = std::mem::take(&mut *self.wakers.lock().expect("kill switch lock"));
        for waker in wakers.into_iter().flatten() {
            waker.wake();
        }
    }

    fn is_pulled(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    /// Registers the waker of one direction (0 read, 1 write); true if the switch was
    /// pulled meanwhile.
    fn register(&self, slot: usize, waker: &Waker) -> bool {
        self.wakers.lock().expect("kill switch lock")[slot] = Some(waker.clone());
        self.is_pulled()
    }
}

/// The live connections, by peer address.
#[derive(Debug, Default)]
pub(crate) struct Connections {
    live: Mutex<HashMap<SocketAddr, Arc<KillSwitch>>>,
}

impl Connections {
    fn add(&self, peer: SocketAddr) -> Arc<KillSwitch> {
        let switch = Arc::new(KillSwitch::default());
        self.live
            .lock()
            .expect("connections lock")
            .insert(peer, switch.clone());
        switch
    }

    fn remove(&self, peer: SocketAddr) {
        self.live.lock().expect("connections lock").remove(&peer);
    }

    /// Cuts the connection from `peer`; false if there is none.
    pub(crate) fn cut(&self, peer: SocketAddr) -> bool {
        let switch = self
            .live
            .lock()
            .expect("connections lock")
            .get(&peer)
            .cloned();
        match switch {
            Some(switch) => {
                switch.pull();
                true
            }
            None => false,
        }
    }

    /// Cuts every connection.
    pub(crate) fn cut_all(&self) {
        let switches: Vec<_> = self
            .live
            .lock()
            .expect("connections lock")
            .values()
            .cloned()
            .collect();
        for switch in switches {
            switch.pull();
        }
    }
}

/// An accepted TCP connection with a kill switch.
pub(crate) struct CuttableStream {
    inner: TcpStream,
    peer: SocketAddr,
    local: Option<SocketAddr>,
    switch: Arc<KillSwitch>,
    registry: Arc<Connections>,
}

impl CuttableStream {
    pub(crate) fn new(inner: TcpStream, peer: SocketAddr, registry: Arc<Connections>) -> Self {
        let switch = registry.add(peer);
        let local = inner.local_addr().ok();
        CuttableStream {
            inner,
            peer,
            local,
            switch,
            registry,
        }
    }
}

impl Drop for CuttableStream {
    fn drop(&mut self) {
        self.registry.remove(self.peer);
    }
}

fn cut_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionReset,
        "connection cut by the simulator",
    )
}

impl AsyncRead for CuttableStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.switch.register(0, cx.waker()) {
            return Poll::Ready(Err(cut_error()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for CuttableStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.switch.register(1, cx.waker()) {
            return Poll::Ready(Err(cut_error()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.switch.register(1, cx.waker()) {
            return Poll::Ready(Err(cut_error()));
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl Connected for CuttableStream {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        TcpConnectInfo {
            local_addr: self.local,
            remote_addr: Some(self.peer),
        }
    }
}
