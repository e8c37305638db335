//! Records made but not yet handed to the journal's writer. They wait in
//! shards, one per thread as far as the shards go, so that calls on
//! different cores do not write into the same memory or wait on the same
//! lock: a shared batch bouncing between two busy cores cost more than
//! the serialisation itself. Each record takes a number from one counter
//! as it enters its shard, and the shards are handed over together, all
//! locked at once: so a batch holds every record numbered before it and
//! none after, and the writer, sorting a batch by number, writes records
//! in the order they were made (a call's start before its end, whichever
//! threads made them).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// How many shards records wait in: more than the cores that make
/// records on most hosts, few enough that locking them all for a
/// hand-over stays cheap.
const SHARDS: usize = 8;

/// Bytes of records one shard gathers before all are handed to the
/// writer: big enough that a hand-over is rare (one per about 140 calls),
/// small enough that a batch stays in the cache.
pub(super) const SHARD_BYTES: usize = 64 << 10;

/// How long records may wait in the buffer once a call has ended: a
/// person reading the journal sees a call within this long, and a busy
/// host writes in batches rather than once per call.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(100);

/// Emptied buffers kept for the shards to reuse: a fresh one costs page
/// faults on its first use, more than a batch's records take to write.
const SPARE_BUFFERS: usize = 2 * SHARDS;

/// Bytes before each record's body in a shard: its number and its length.
const HEAD_BYTES: usize = 16;

/// What the journal sends its writer.
pub(super) enum ToWriter {
    /// The shards' records (each a sequence of number, length, body).
    Batch(Vec<Vec<u8>>),
    /// Answered once everything sent before it is written.
    Flushed(SyncSender<()>),
}

/// One shard, alone on its cache lines.
#[repr(align(128))]
struct Shard(Mutex<Vec<u8>>);

thread_local! {
    /// The shard this thread's records go to, taken in turn by the
    /// threads that make records.
    static SHARD_OF_THREAD: usize = {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS
    };
}

/// The shards, the counter that orders their records, and the way to
/// the writer.
pub(super) struct Pending {
    shards: Box<[Shard]>,
    /// The next record's number: taken under its shard's lock, so a
    /// hand-over (which holds every shard's lock) sees all lower numbers.
    next: AtomicU64,
    /// Held while a batch is cut and sent, so batches reach the writer
    /// in the order they were cut; `None` once the journal is closing.
    to_writer: Mutex<Option<Sender<ToWriter>>>,
    /// Buffers the writer has written and given back.
    spare: Arc<Spare>,
}

/// Emptied shard buffers, passed back by the writer.
#[derive(Default)]
pub(super) struct Spare(Mutex<Vec<Vec<u8>>>);

impl Spare {
    /// Keeps the batch's buffers (emptied) for the shards to reuse.
    pub(super) fn give_back(&self, batch: Vec<Vec<u8>>) {
        let mut spare = locked(&self.0);
        for mut buffer in batch {
            if spare.len() < SPARE_BUFFERS {
                buffer.clear();
                spare.push(buffer);
            }
        }
    }

    fn take(&self) -> Vec<u8> {
        locked(&self.0)
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(SHARD_BYTES))
    }
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Pending {
    pub(super) fn new(to_writer: Sender<ToWriter>) -> Pending {
        Pending {
            shards: (0..SHARDS)
                .map(|_| Shard(Mutex::new(Vec::with_capacity(SHARD_BYTES))))
                .collect(),
            next: AtomicU64::new(0),
            to_writer: Mutex::new(Some(to_writer)),
            spare: Arc::default(),
        }
    }

    /// Where the writer gives emptied buffers back.
    pub(super) fn spare(&self) -> Arc<Spare> {
        self.spare.clone()
    }

    /// Adds one record, whose body `write` appends to the buffer it is
    /// given (nothing is kept if it fails). Returns whether this thread's
    /// shard is now full, and the shards should be handed over.
    pub(super) fn push<E>(
        &self,
        write: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<bool, E> {
        let shard = &self.shards[SHARD_OF_THREAD.with(|shard| *shard)];
        let mut buffer = locked(&shard.0);
        let start = buffer.len();
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        buffer.extend_from_slice(&number.to_le_bytes());
        buffer.extend_from_slice(&[0; 8]);
        if let Err(e) = write(&mut buffer) {
            buffer.truncate(start);
            return Err(e);
        }
        let len = (buffer.len() - start - HEAD_BYTES) as u64;
        buffer[start + 8..start + HEAD_BYTES].copy_from_slice(&len.to_le_bytes());
        Ok(buffer.len() >= SHARD_BYTES)
    }

    /// Sends every shard's records to the writer as one batch.
    pub(super) fn hand_over(&self) {
        let to_writer = locked(&self.to_writer);
        self.cut_and_send(to_writer.as_ref());
    }

    /// Takes the shards' records, all shards locked at once, and sends
    /// them (the caller holds the send lock).
    fn cut_and_send(&self, to_writer: Option<&Sender<ToWriter>>) {
        let mut shards: Vec<MutexGuard<'_, Vec<u8>>> =
            self.shards.iter().map(|shard| locked(&shard.0)).collect();
        let batch: Vec<Vec<u8>> = shards
            .iter_mut()
            .filter(|buffer| !buffer.is_empty())
            .map(|buffer| std::mem::replace(&mut **buffer, self.spare.take()))
            .collect();
        drop(shards);
        if let (Some(to_writer), false) = (to_writer, batch.is_empty()) {
            let _ = to_writer.send(ToWriter::Batch(batch));
        }
    }

    /// Hands everything over and asks the writer to say when it is
    /// written (`None`: the writer is gone).
    pub(super) fn flush(&self) -> Option<Receiver<()>> {
        let to_writer = locked(&self.to_writer);
        self.cut_and_send(to_writer.as_ref());
        let (done, written) = std::sync::mpsc::sync_channel(1);
        to_writer.as_ref()?.send(ToWriter::Flushed(done)).ok()?;
        Some(written)
    }

    /// Lets the writer end once it has written what it was sent.
    pub(super) fn close(&self) {
        locked(&self.to_writer).take();
    }
}

/// A batch's records in the order they were made: `(number, body)`.
pub(super) fn in_order(batch: &[Vec<u8>]) -> Vec<(u64, &[u8])> {
    let mut records = Vec::with_capacity(batch.iter().map(|part| part.len() / 400 + 1).sum());
    for part in batch {
        let mut rest = &part[..];
        while rest.len() >= HEAD_BYTES {
            let number = u64::from_le_bytes(rest[..8].try_into().unwrap_or_default());
            let len = u64::from_le_bytes(rest[8..HEAD_BYTES].try_into().unwrap_or_default());
            let end = HEAD_BYTES.saturating_add(len as usize).min(rest.len());
            records.push((number, &rest[HEAD_BYTES..end]));
            rest = &rest[end..];
        }
    }
    // One thread's records (the usual batch of a quiet host) are in
    // order already.
    if !records.is_sorted_by_key(|(number, _)| *number) {
        records.sort_unstable_by_key(|(number, _)| *number);
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bodies(batch: &[Vec<u8>]) -> Vec<String> {
        in_order(batch)
            .into_iter()
            .map(|(_, body)| String::from_utf8_lossy(body).into_owned())
            .collect()
    }

    /// Records made on many threads, handed over while they are made,
    /// reach the writer each batch in order and the batches in order: a
    /// thread's records in the order it made them, and every number once.
    #[test]
    fn records_from_many_threads_arrive_in_the_order_they_were_made() {
        const THREADS: usize = 6;
        const EACH: usize = 3_000;
        let (to_writer, inbox) = std::sync::mpsc::channel();
        let pending = std::sync::Arc::new(Pending::new(to_writer));
        let threads: Vec<_> = (0..THREADS)
            .map(|thread| {
                let pending = pending.clone();
                std::thread::spawn(move || {
                    for i in 0..EACH {
                        let full = pending
                            .push(|buffer| {
                                buffer.extend_from_slice(format!("{thread}:{i}").as_bytes());
                                Ok::<(), ()>(())
                            })
                            .unwrap();
                        // Hand over often, from every thread, while the
                        // others are still adding.
                        if full || i % 97 == 0 {
                            pending.hand_over();
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let written = pending.flush().expect("the inbox is open");
        drop(pending);
        let mut next_of_thread = [0usize; THREADS];
        let (mut last_number, mut count) = (None, 0);
        for message in inbox.try_iter() {
            let ToWriter::Batch(batch) = message else {
                continue;
            };
            for (number, body) in in_order(&batch) {
                assert!(last_number < Some(number), "{number} after {last_number:?}");
                last_number = Some(number);
                let body = std::str::from_utf8(body).unwrap();
                let (thread, i) = body.split_once(':').unwrap();
                let thread: usize = thread.parse().unwrap();
                assert_eq!(
                    i.parse::<usize>().unwrap(),
                    next_of_thread[thread],
                    "{body}"
                );
                next_of_thread[thread] += 1;
                count += 1;
            }
        }
        assert_eq!(count, THREADS * EACH);
        drop(written);
    }

    #[test]
    fn a_record_that_fails_to_write_leaves_nothing() {
        let (to_writer, inbox) = std::sync::mpsc::channel();
        let pending = Pending::new(to_writer);
        pending
            .push(|b| {
                b.extend_from_slice(b"one");
                Ok::<(), ()>(())
            })
            .unwrap();
        let failed = pending.push(|b| {
            b.extend_from_slice(b"half of two");
            Err("no")
        });
        assert_eq!(failed, Err("no"));
        pending
            .push(|b| {
                b.extend_from_slice(b"three");
                Ok::<(), ()>(())
            })
            .unwrap();
        pending.hand_over();
        let Ok(ToWriter::Batch(batch)) = inbox.try_recv() else {
            panic!("no batch");
        };
        assert_eq!(bodies(&batch), ["one", "three"]);
    }
}
