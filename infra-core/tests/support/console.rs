//! A console for the runner's tests: buffers for its two streams, answers scripted in
//! advance, and a fresh state directory.

use std::io::Write;
use std::sync::{Arc, Mutex};

use infra_core::cli::{Console, ProgressStyle, run_with};
use infra_core::prelude::{Backends, CheckReport, Fleet};
use infra_testkit::sim::SimCloud;

/// One stream's bytes.
#[derive(Clone, Default)]
pub struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buffer {
    /// Everything written since the last take.
    pub fn take(&self) -> String {
        String::from_utf8(std::mem::take(&mut *self.0.lock().unwrap())).unwrap()
    }
}

/// What a question is answered with, and what happens while it is asked.
pub type Answer = Box<dyn FnMut(&str) -> bool + Send>;

/// A person (or a pipeline) at a console, with a state directory of their own.
pub struct Session {
    pub out: Buffer,
    pub err: Buffer,
    pub console: Console,
    pub state: tempfile::TempDir,
    /// The questions asked so far.
    pub questions: Arc<Mutex<Vec<String>>>,
}

/// A session; `interactive` says whether a person can answer, and `answer` how.
pub fn session(interactive: bool, mut answer: Answer) -> Session {
    let (out, err) = (Buffer::default(), Buffer::default());
    let questions = Arc::new(Mutex::new(Vec::new()));
    let asked = Arc::clone(&questions);
    let console = Console {
        out: Box::new(out.clone()),
        err: Box::new(err.clone()),
        interactive,
        colour: false,
        progress: ProgressStyle::Off,
        confirm: Box::new(move |q| {
            asked.lock().unwrap().push(q.to_owned());
            answer(q)
        }),
    };
    Session {
        out,
        err,
        console,
        state: tempfile::tempdir().unwrap(),
        questions,
    }
}

/// A session that always answers `yes` (or always no).
pub fn answering(interactive: bool, yes: bool) -> Session {
    session(interactive, Box::new(move |_| yes))
}

impl Session {
    /// Runs one command line of a program named `infra-test`, with this session's
    /// state directory, on `backends`.
    pub async fn run_on(
        &mut self,
        fleet: Result<Fleet, CheckReport>,
        backends: Backends,
        args: &[&str],
    ) -> (u8, String, String) {
        let state = self.state.path().to_str().unwrap().to_owned();
        let mut argv = vec!["infra-test".to_owned(), "--state-dir".to_owned(), state];
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        let code = run_with(argv, fleet, |_| backends, &mut self.console).await;
        (code, self.out.take(), self.err.take())
    }

    /// Runs one command line against every provider of a simulated cloud.
    pub async fn run(
        &mut self,
        fleet: Result<Fleet, CheckReport>,
        cloud: &SimCloud,
        args: &[&str],
    ) -> (u8, String, String) {
        self.run_on(fleet, cloud.backends(), args).await
    }

    /// The path of a file in the state directory's parent (beside the records).
    pub fn path(&self, name: &str) -> String {
        self.state.path().join(name).to_str().unwrap().to_owned()
    }
}

/// The JSON document of a command's standard output.
pub fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not one JSON document ({e}):\n{out}"))
}
