//! A list that grows by fixed-size chunks and never moves what it holds.
//!
//! The executor and the scheduler keep a record per call for the whole
//! session. In a `Vec` those records are copied each time it doubles, and
//! the doubled block is new memory the kernel must fault in and zero: over
//! a 10,000-call response that was a fifth of the executor's own work per
//! call. A [`ChunkedVec`] allocates one more chunk when the last is full, so
//! each record is written once, where it stays.

use std::ops::{Index, IndexMut};

/// Elements per chunk: a few tens of KiB for the records kept here, small
/// enough that a short session does not reserve much, large enough that
/// the list of chunks stays short.
const CHUNK_LEN: usize = 256;

/// A growable list indexed like a `Vec`, whose elements never move.
#[derive(Debug, Clone)]
pub struct ChunkedVec<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for ChunkedVec<T> {
    fn default() -> Self {
        ChunkedVec::new()
    }
}

impl<T> ChunkedVec<T> {
    pub const fn new() -> ChunkedVec<T> {
        ChunkedVec {
            chunks: Vec::new(),
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `value` at index `len()`.
    pub fn push(&mut self, value: T) {
        let chunk = self.len / CHUNK_LEN;
        if chunk == self.chunks.len() {
            self.chunks.push(Vec::with_capacity(CHUNK_LEN));
        }
        self.chunks[chunk].push(value);
        self.len += 1;
    }

    /// Removes every element, keeping the chunks for what is pushed next
    /// (as `Vec::clear` keeps its capacity).
    pub fn clear(&mut self) {
        for chunk in &mut self.chunks {
            chunk.clear();
        }
        self.len = 0;
    }

    /// The element at `index`, if there is one.
    pub fn get(&self, index: usize) -> Option<&T> {
        self.chunks
            .get(index / CHUNK_LEN)
            .and_then(|chunk| chunk.get(index % CHUNK_LEN))
    }

    /// The element at `index` mutably, if there is one.
    pub fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        self.chunks
            .get_mut(index / CHUNK_LEN)
            .and_then(|chunk| chunk.get_mut(index % CHUNK_LEN))
    }

    /// The elements in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> {
        self.chunks.iter().flatten()
    }

    /// The elements from `start` on, mutably, in order.
    pub fn iter_mut_from(&mut self, start: usize) -> impl Iterator<Item = &mut T> {
        let (first, skip) = (start / CHUNK_LEN, start % CHUNK_LEN);
        self.chunks.iter_mut().skip(first).flatten().skip(skip)
    }
}

impl<'a, T> IntoIterator for &'a ChunkedVec<T> {
    type Item = &'a T;
    type IntoIter = std::iter::Flatten<std::slice::Iter<'a, Vec<T>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.chunks.iter().flatten()
    }
}

impl<T> Index<usize> for ChunkedVec<T> {
    type Output = T;

    fn index(&self, index: usize) -> &T {
        match self.get(index) {
            Some(value) => value,
            None => panic!("index {index} out of range for a list of {}", self.len),
        }
    }
}

impl<T> IndexMut<usize> for ChunkedVec<T> {
    fn index_mut(&mut self, index: usize) -> &mut T {
        let len = self.len;
        match self.get_mut(index) {
            Some(value) => value,
            None => panic!("index {index} out of range for a list of {len}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_across_chunks_like_a_vec() {
        let mut list = ChunkedVec::new();
        let mut reference = Vec::new();
        for i in 0..(CHUNK_LEN * 3 + 7) {
            list.push(i * 3);
            reference.push(i * 3);
        }
        assert_eq!(list.len(), reference.len());
        for (i, value) in reference.iter().enumerate() {
            assert_eq!(list[i], *value);
        }
        assert!(list.iter().eq(reference.iter()));
        assert_eq!(list.get(reference.len()), None);
        list[CHUNK_LEN] = 1;
        assert_eq!(list[CHUNK_LEN], 1);
    }

    #[test]
    fn iterates_mutably_from_any_start() {
        for start in [
            0,
            1,
            CHUNK_LEN - 1,
            CHUNK_LEN,
            CHUNK_LEN + 1,
            2 * CHUNK_LEN + 5,
        ] {
            let mut list = ChunkedVec::new();
            for i in 0..(2 * CHUNK_LEN + 6) {
                list.push(i);
            }
            let seen: Vec<usize> = list.iter_mut_from(start).map(|v| *v).collect();
            assert_eq!(seen, (start..2 * CHUNK_LEN + 6).collect::<Vec<_>>());
        }
    }

    #[test]
    fn elements_do_not_move_as_it_grows() {
        let mut list = ChunkedVec::new();
        list.push(String::from("first"));
        let at = &list[0] as *const String;
        for i in 0..(CHUNK_LEN * 4) {
            list.push(i.to_string());
        }
        assert_eq!(at, &list[0] as *const String);
    }

    #[test]
    fn a_cleared_list_fills_again_from_the_start() {
        let mut list = ChunkedVec::new();
        for i in 0..(CHUNK_LEN + 3) {
            list.push(i);
        }
        list.clear();
        assert!(list.is_empty());
        assert_eq!(list.iter().count(), 0);
        for i in 0..5 {
            list.push(i + 100);
        }
        assert_eq!(list.len(), 5);
        assert!((&list).into_iter().copied().eq(100..105));
        assert_eq!(list.get(5), None);
        assert_eq!(list.iter_mut_from(3).count(), 2);
    }

    #[test]
    #[should_panic(expected = "index 3 out of range for a list of 3")]
    fn an_index_past_the_end_panics_as_a_slice_would() {
        let mut list = ChunkedVec::new();
        for i in 0..3 {
            list.push(i);
        }
        let _ = list[3];
    }
}
