//! The whole isolate's heap stays flat under a long stream of requests of
//! every kind a client chooses: the live bytes after 40,000 requests are
//! those after 10,000 (a counting allocator measures them).
//!
//!     cargo test --test isolate_memory -- --nocapture    (prints the bytes)

use hedgehog_core::vec_map::VecMap;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use hedgehog_core::header_list::HeaderList;
use hedgehog_core::isolate::{Answer, Intake, Isolate, RequestHead, Step};
use hedgehog_core::race::{Leg, RaceEvent};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

static NO_HEADERS: HeaderList = HeaderList::EMPTY;

/// One request of `method` to `url`, answered `status` by its primary 2 ms later.
fn request(iso: &mut Isolate, method: &str, url: &str, status: u16, now_ms: f64) {
    let head = RequestHead {
        url,
        method,
        has_body: false,
        headers: &NO_HEADERS,
    };
    let Intake::Proxy(exchange, first) = iso.accept(&head, now_ms) else {
        panic!("{method} {url} not proxied");
    };
    // A lookup first finds nothing.
    let step = match first {
        Step::LookUp { .. } => iso.found(&exchange, None, &NO_HEADERS, url, false),
        other => other,
    };
    let Step::Race { plan, .. } = step else {
        panic!("{method} {url}: no race: {step:?}");
    };
    let (mut race, _) = iso.start(plan, &exchange, now_ms);
    let answered = RaceEvent::Answered(Leg::Primary, Ok(status));
    iso.handle(&exchange, &mut race, answered, now_ms + 2.0);
    let answer = Answer {
        status: Some(status),
        headers: &NO_HEADERS,
        request: &NO_HEADERS,
        generation: None,
        stale_if_error: None,
        revalidated: None,
        analytics: false,
    };
    // A write's invalidation is recorded by the completion itself.
    iso.complete(&exchange, &race, &answer, url, now_ms + 2.0);
}

#[test]
fn the_isolates_heap_is_flat_under_every_kind_of_request() {
    let mut vars = VecMap::new();
    vars.insert(
        "HEDGE_ORIGINS".to_string(),
        r#"[{"name":"a","url":"http://a"},{"name":"b","url":"http://b"}]"#.to_string(),
    );
    vars.insert("HEDGE_CACHE".to_string(), "false".to_string());
    let params = hedgehog_core::config::parse(&vars).expect("valid");
    let mut iso = Isolate::new(params, false, 0.0, 1);
    let kinds: [(&str, u16); 5] = [
        ("GET", 200),
        ("POST", 201),
        ("OPTIONS", 204),
        ("PUT", 200),
        ("GET", 500),
    ];
    let mut live = Vec::new();
    let mut now = 0.0;
    for i in 0..40_000u32 {
        // 100 requests a second: the windows (60 s) fill and slide.
        now += 10.0;
        let (method, status) = kinds[i as usize % kinds.len()];
        let url = format!("https://edge.test/k{}/{i}", i % 7);
        request(&mut iso, method, &url, status, now);
        if i == 9_999 || i == 39_999 {
            live.push(LIVE.load(Ordering::Relaxed));
        }
    }
    println!(
        "live heap after 10,000 requests: {} bytes; after 40,000: {} bytes",
        live[0], live[1]
    );
    assert!(
        live[1] - live[0] < 64 * 1024,
        "the heap grew {} bytes over 30,000 requests",
        live[1] - live[0]
    );
}
