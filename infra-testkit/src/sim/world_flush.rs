//! Flushing the journal to disk in groups. A call that changed the world answers only
//! once its journal line is on disk, but the calls in flight at the same time need not
//! each wait for a flush of their own: a flush covers every line written to the file
//! before it began. A call's line is written under the world's lock, and the call then
//! waits, outside the lock, for the next flush that covers it; while one flush runs, the
//! lines of the calls that arrive are written, and the next flush covers them all. The
//! flushes run on a thread of their own, started at the first and ended with the world.

use std::fs::File;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// A journal line written and waiting for its flush.
pub(crate) struct Unflushed(pub(crate) Arc<File>);

/// One flush asked for: the file, and where to say how it went.
struct Request {
    file: Arc<File>,
    done: oneshot::Sender<Result<(), String>>,
}

/// The flushing thread of one world, started when first asked.
#[derive(Default)]
pub(crate) struct Flusher {
    requests: Mutex<Option<Sender<Request>>>,
}

impl std::fmt::Debug for Flusher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Flusher")
    }
}

impl Flusher {
    /// Waits until what was written to the file is on disk: `Err` with what the system
    /// said when the flush failed (or the flushing thread could not be started).
    pub(crate) async fn flush(&self, unflushed: Unflushed) -> Result<(), String> {
        let (done, answer) = oneshot::channel();
        let request = Request {
            file: unflushed.0,
            done,
        };
        self.send(request)?;
        answer
            .await
            .unwrap_or_else(|_| Err("the flushing thread stopped".into()))
    }

    fn send(&self, request: Request) -> Result<(), String> {
        let mut requests = self
            .requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if requests.is_none() {
            let (tx, rx) = channel();
            std::thread::Builder::new()
                .name("sim-world-flush".into())
                .spawn(move || flush_in_groups(&rx))
                .map_err(|e| format!("no flushing thread: {e}"))?;
            *requests = Some(tx);
        }
        let tx = requests.as_ref().expect("started above");
        tx.send(request)
            .map_err(|_| "the flushing thread stopped".to_string())
    }
}

/// The thread's loop: waits for a request, takes every other one already waiting, flushes
/// each file among them once, and answers them all. Ends when the world is dropped.
fn flush_in_groups(requests: &Receiver<Request>) {
    while let Ok(first) = requests.recv() {
        let mut group = vec![first];
        group.extend(requests.try_iter());
        let mut flushed: Vec<(Arc<File>, Result<(), String>)> = Vec::new();
        for request in group {
            let known = flushed
                .iter()
                .find(|(file, _)| Arc::ptr_eq(file, &request.file));
            let result = match known {
                Some((_, result)) => result.clone(),
                None => {
                    let result = request.file.sync_data().map_err(|e| e.to_string());
                    flushed.push((Arc::clone(&request.file), result.clone()));
                    result
                }
            };
            // A caller that stopped waiting needs no answer.
            let _ = request.done.send(result);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn every_waiter_is_answered_and_the_lines_are_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        let file = Arc::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .unwrap(),
        );
        let flusher = Arc::new(Flusher::default());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut waits = Vec::new();
            for i in 0..50 {
                writeln!(&*file, "line {i}").unwrap();
                let flusher = Arc::clone(&flusher);
                let unflushed = Unflushed(Arc::clone(&file));
                waits.push(async move { flusher.flush(unflushed).await });
            }
            for result in futures::future::join_all(waits).await {
                assert_eq!(result, Ok(()));
            }
        });
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 50);
    }
}
