//! A real headless browser for console tests: Debian's `chromium` driven
//! through `chromedriver` (WebDriver) with `fantoccini`.
//!
//! [`Browser::start`] runs `chromedriver` on a port the OS chose, opens a
//! headless Chromium session, and [`Drop`] ends the session and kills the
//! driver (by its own PID). Every wait is bounded ([`WAIT`]) and polls the
//! page, never sleeps blindly. A test that fails with a browser open leaves
//! a screenshot in `$TMPDIR/kappa-browser-failures/` (the path is printed).

#![allow(dead_code)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

/// Longest wait for an element, a text or the driver.
pub const WAIT: Duration = Duration::from_secs(30);

/// A headless Chromium session and the chromedriver serving it.
pub struct Browser {
    driver: Child,
    client: Option<Client>,
    io: tokio::runtime::Runtime,
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session.
    pub fn start() -> Browser {
        let driver_bin = std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "chromedriver".into());
        let port = free_port();
        let driver = Command::new(&driver_bin)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run {driver_bin} (apt-get install chromium chromium-driver; .ci/run installs them): {e}")
            });
        let io = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut browser = Browser {
            driver,
            client: None,
            io,
        };
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({"args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000"]}),
        );
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + WAIT;
        // The driver needs a moment to listen: retry the session until then.
        let client = loop {
            let attempt = browser.io.block_on(
                ClientBuilder::new(HttpConnector::new())
                    .capabilities(caps.clone())
                    .connect(&url),
            );
            match attempt {
                Ok(client) => break client,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => panic!("no WebDriver session at {url}: {e}"),
            }
        };
        browser.client = Some(client);
        browser
    }

    fn client(&self) -> &Client {
        self.client.as_ref().expect("a session")
    }

    /// Opens `url`.
    pub fn goto(&self, url: &str) {
        self.io.block_on(self.client().goto(url)).unwrap();
    }

    /// The element `css`, waiting until it exists.
    pub fn find(&self, css: &str) -> Element {
        self.io
            .block_on(
                self.client()
                    .wait()
                    .at_most(WAIT)
                    .for_element(Locator::Css(css)),
            )
            .unwrap_or_else(|e| panic!("no element {css}: {e}"))
    }

    /// Clicks `css` once it is shown.
    pub fn click(&self, css: &str) {
        let element = self.until(&format!("{css} shown"), || {
            let e = self.find(css);
            let shown = self.io.block_on(e.is_displayed()).unwrap_or(false);
            shown.then_some(e)
        });
        self.io.block_on(element.click()).unwrap();
    }

    /// The visible text of `css`.
    pub fn text(&self, css: &str) -> String {
        let e = self.find(css);
        self.io.block_on(e.text()).unwrap_or_default()
    }

    /// Selects the option with `value` of the `<select>` `css`, once it
    /// has that option.
    pub fn select(&self, css: &str, value: &str) {
        self.find(&format!("{css} option[value=\"{value}\"]"));
        let select = self.find(css);
        self.io.block_on(select.select_by_value(value)).unwrap();
    }

    /// Types `text` into the field `css` (after clearing it), as keystrokes.
    pub fn type_into(&self, css: &str, text: &str) {
        let field = self.find(css);
        self.io.block_on(field.clear()).unwrap();
        self.io.block_on(field.send_keys(text)).unwrap();
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page
    /// and returns what it returns.
    pub fn execute(&self, script: &str, args: Vec<serde_json::Value>) -> serde_json::Value {
        self.io
            .block_on(self.client().execute(script, args))
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// Runs `script` in the page until it calls its callback, the last of
    /// `arguments`, and returns the value given to it.
    pub fn execute_async(&self, script: &str, args: Vec<serde_json::Value>) -> serde_json::Value {
        self.io
            .block_on(self.client().execute_async(script, args))
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// Saves a PNG of the page at `path` (e.g. to look at a page a test
    /// saw); `false` if the browser could not take one.
    pub fn screenshot(&self, path: &std::path::Path) -> bool {
        match self.io.block_on(self.client().screenshot()) {
            Ok(png) => std::fs::write(path, png).is_ok(),
            Err(_) => false,
        }
    }

    /// The text of the open `alert`/`confirm`/`prompt` dialog, if one is open.
    pub fn open_dialog(&self) -> Option<String> {
        self.io.block_on(self.client().get_alert_text()).ok()
    }

    /// The `id` of the element that has the focus.
    pub fn focused_id(&self) -> String {
        let e = self.io.block_on(self.client().active_element()).unwrap();
        self.io.block_on(e.attr("id")).unwrap().unwrap_or_default()
    }

    /// Whether `css` exists and is shown.
    pub fn shown(&self, css: &str) -> bool {
        let found = self.io.block_on(self.client().find(Locator::Css(css)));
        match found {
            Ok(e) => self.io.block_on(e.is_displayed()).unwrap_or(false),
            Err(_) => false,
        }
    }

    /// Polls `f` until it answers, at most [`WAIT`].
    pub fn until<T>(&self, what: &str, f: impl FnMut() -> Option<T>) -> T {
        self.until_opt(f)
            .unwrap_or_else(|| panic!("timed out waiting for {what}"))
    }

    /// Waits until the text of `css` satisfies `pred`; returns it.
    pub fn text_until(&self, css: &str, pred: impl Fn(&str) -> bool) -> String {
        let mut last = String::new();
        let found = self.until_opt(|| {
            last = self.text(css);
            pred(&last).then(|| last.clone())
        });
        found.unwrap_or_else(|| panic!("text of {css} never matched; last: {last:?}"))
    }

    /// Polls `f` until it answers, at most [`WAIT`]; `None` on timeout.
    fn until_opt<T>(&self, mut f: impl FnMut() -> Option<T>) -> Option<T> {
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            if let Some(v) = f() {
                return Some(v);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            // A failing test leaves a picture of the page behind.
            if std::thread::panicking() {
                if let Ok(png) = self.io.block_on(client.screenshot()) {
                    let dir = std::env::temp_dir().join("kappa-browser-failures");
                    let path = dir.join(format!(
                        "{}-{}.png",
                        std::thread::current()
                            .name()
                            .unwrap_or("test")
                            .replace("::", "-"),
                        std::process::id()
                    ));
                    if std::fs::create_dir_all(&dir).is_ok() && std::fs::write(&path, png).is_ok() {
                        eprintln!("screenshot of the page: {}", path.display());
                    }
                }
            }
            let _ = self.io.block_on(client.close());
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
