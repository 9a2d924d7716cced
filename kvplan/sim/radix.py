"""SGLang's radix cache over a paged pool (0.5.23 semantics; see reference/sglang-0.5.23.md §4).

- The tree's unit is a page (64 tokens, 64 × dcp under dcp). Edges are runs of page keys; a lookup keys a child
  by its first page. ``match`` walks the longest cached run of whole pages (so a match is page-aligned), splits
  a node when the match ends inside it, and refreshes ``last_access`` along the path.
- A running request locks its matched path (``lock_ref`` walks to the root); only unlocked leaves are
  evictable. ``evict(n)`` pops leaves in policy order (``POLICIES``) until at least ``n`` pages are freed.
  Eviction is whole-node, so it can overshoot by up to one node; a parent left childless and unlocked becomes a
  candidate.
- When a request finishes (or after its prefill, ``commit``), its whole pages are inserted; pages it computed
  that the tree already holds are freed as duplicates, and its trailing partial page is freed.
- EAGLE/MTP (``eagle``): bigram keys (at ``RadixPool._matchable``).

Times are a logical clock: one tick per match or insert, shared by every node it touches.
"""

from __future__ import annotations

import heapq

from kvplan.sim.pool import Seq
from kvplan.units import cdiv

# Policies (``--radix-eviction-policy``), smallest key evicted first: lru ``last_access``; lfu ``(hits,
# last_access)``; fifo ``creation``; mru ``-last_access``; filo ``-creation``; priority ``(priority,
# last_access)`` (traces carry no priority, so it orders like lru). A node split off another is created at the
# split, as in SGLang.
POLICIES = ("lru", "lfu", "fifo", "mru", "filo", "priority")
_SHIFT = 1 << 44


class _Node:
    __slots__ = ("children", "created", "dead", "hits", "id", "key", "last", "lock", "parent", "ver")

    def __init__(self, key: list[int], parent: _Node | None, now: int, nid: int) -> None:
        self.key = key
        self.parent = parent
        self.children: dict[int, _Node] = {}
        self.lock = 0
        self.last = now
        self.created = now
        self.hits = 0
        self.id = nid
        self.ver = 0
        self.dead = False


class RadixPool:
    semantics = "sglang"

    def __init__(
        self, pages: int, page_tokens: int, *, policy: str = "lru", eagle: bool = False, check: bool = False
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown SGLang eviction policy {policy!r}")
        self.pages = pages
        self.page_tokens = page_tokens
        self.policy = policy
        self.eagle = eagle
        self.check = check
        self.free = pages
        self.tree_pages = 0
        self.evictable = 0
        self.private = 0
        self.evictions = 0
        self._clock = 0
        self._ids = 1
        self.root = _Node([], None, 0, 0)
        self.root.lock = 1
        self._heap: list[tuple[int, int, int, _Node]] = []

    # ------------------------------------------------------------------ accounting

    def free_pages(self) -> int:
        return self.free

    def cached_pages(self) -> int:
        return self.evictable

    def held_pages(self) -> int:
        return self.private + self.tree_pages - self.evictable

    def can_ever_fit(self, tokens: int) -> bool:
        return cdiv(tokens, self.page_tokens) <= self.pages

    def describe(self) -> str:
        return (
            f"SGLang radix cache: {self.page_tokens}-token pages, matches rounded down to whole pages, "
            f"{self.policy} eviction of unlocked leaves, running requests lock their path"
            + (", EAGLE bigram keys (at most (L − 1) // page pages)" if self.eagle else "")
        )

    # ------------------------------------------------------------------ tree

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def _priority(self, n: _Node) -> int:
        p = self.policy
        if p in ("lru", "priority"):
            return n.last
        if p == "fifo":
            return n.created
        if p == "mru":
            return -n.last
        if p == "filo":
            return -n.created
        return n.hits * _SHIFT + n.last  # lfu

    def _push(self, n: _Node) -> None:
        """Enter an unlocked leaf as an eviction candidate with its current priority."""
        n.ver += 1
        heapq.heappush(self._heap, (self._priority(n), n.id, n.ver, n))

    def _refresh(self, touched: list[_Node]) -> None:
        for n in touched:
            if not n.lock and not n.children and not n.dead:
                self._push(n)

    def _split(self, child: _Node, at: int, now: int) -> _Node:
        parent = child.parent
        assert parent is not None
        new = _Node(child.key[:at], parent, now, self._ids)
        self._ids += 1
        new.lock = child.lock
        child.key = child.key[at:]
        child.parent = new
        new.children[child.key[0]] = child
        parent.children[new.key[0]] = new
        return new

    def _touch_path(self, node: _Node, now: int, touched: list[_Node]) -> None:
        """Refresh the path from the root to ``node`` (the root excluded) as a walk down it would."""
        root = self.root
        while node is not root:
            node.last = now
            touched.append(node)
            parent = node.parent
            assert parent is not None
            node = parent

    def _path(self, node: _Node) -> list[int]:
        """The page keys from the root to ``node`` (debug checks)."""
        parts = []
        while node.parent is not None:
            parts.append(node.key)
            node = node.parent
        return [k for part in reversed(parts) for k in part]

    def _walk(
        self,
        keys: list[int],
        now: int,
        touched: list[_Node],
        count_hits: bool,
        start: _Node | None = None,
        at: int = 0,
        end: int | None = None,
    ) -> tuple[int, _Node]:
        """Match ``keys[:end]`` (all of them by default; not copied) from the root, refreshing what it passes and
        splitting the node it ends inside.

        ``start``: a node whose path is ``keys[:at]`` (one a running request locks: it stays in the tree, and a
        split above it only cuts its path into more nodes): that path is refreshed bottom-up instead of matched
        key by key, and the walk goes on from there (not with ``count_hits``: a match counts the nodes it passes)."""
        node = self.root
        node.last = now
        i = 0
        n_keys = len(keys) if end is None else end
        if start is not None and 0 < at <= n_keys:
            if self.check:
                assert self._path(start) == keys[:at], "the walk's start is not on the keys' path"
            self._touch_path(start, now, touched)
            node = start
            i = at
        while i < n_keys:
            child = node.children.get(keys[i])
            if child is None:
                break
            child.last = now
            if count_hits:
                child.hits += 1
            ck = child.key
            n = len(ck)
            if i + n <= n_keys and keys[i : i + n] == ck:
                i += n
                node = child
                touched.append(child)
                continue
            p = 1
            while p < n and i + p < n_keys and keys[i + p] == ck[p]:
                p += 1
            touched.append(child)
            node = self._split(child, p, now)
            i += p
            break
        return i, node

    def match(self, keys: list[int], end: int | None = None) -> tuple[int, _Node]:
        """Pages of ``keys[:end]`` cached, and the node the match ends at (split there if needed)."""
        touched: list[_Node] = []
        m, node = self._walk(keys, self._tick(), touched, True, end=end)
        self._refresh(touched)
        return m, node

    def insert(
        self, keys: list[int], start: _Node | None = None, at: int = 0, end: int | None = None
    ) -> tuple[int, _Node]:
        """Insert the whole pages ``keys[:end]``; returns how many were already in the tree (the duplicates) and
        the node the keys end at. ``start``, ``at``: a node whose path is ``keys[:at]`` (see ``_walk``)."""
        now = self._tick()
        touched: list[_Node] = []
        n_keys = len(keys) if end is None else end
        p, node = self._walk(keys, now, touched, False, start, at, n_keys)
        if p < n_keys:
            leaf = _Node(keys[p:n_keys], node, now, self._ids)
            self._ids += 1
            node.children[keys[p]] = leaf
            added = n_keys - p
            self.tree_pages += added
            self.evictable += added
            touched.append(leaf)
            node = leaf
        self._refresh(touched)
        return p, node

    def _lock(self, node: _Node) -> None:
        while node is not self.root:
            if node.lock == 0:
                self.evictable -= len(node.key)
            node.lock += 1
            assert node.parent is not None
            node = node.parent

    def _unlock(self, node: _Node) -> None:
        while node is not self.root:
            node.lock -= 1
            if node.lock == 0:
                self.evictable += len(node.key)
                if not node.children:
                    self._push(node)
            assert node.parent is not None
            node = node.parent

    def evict(self, pages: int) -> int:
        """Free at least ``pages`` pages by evicting unlocked leaves in policy order (whole nodes)."""
        freed = 0
        heap = self._heap
        while freed < pages and heap:
            _, _, ver, n = heapq.heappop(heap)
            if n.ver != ver or n.dead or n.lock or n.children:
                continue
            parent = n.parent
            assert parent is not None
            del parent.children[n.key[0]]
            n.dead = True
            size = len(n.key)
            freed += size
            self.tree_pages -= size
            self.evictable -= size
            self.free += size
            if parent is not self.root and not parent.children and not parent.lock:
                self._push(parent)
        self.evictions += freed
        return freed

    def _take(self, pages: int) -> bool:
        if self.free < pages:
            if self.free + self.evictable < pages:
                return False
            self.evict(pages - self.free)
        self.free -= pages
        self.private += pages
        return True

    # ------------------------------------------------------------------ requests

    def _matchable(self, tokens: int) -> int:
        # EAGLE/MTP keys are bigrams, so a request of L tokens matches and inserts at most (L - 1) // page pages. A
        # divergence exactly at a page boundary, which bigram keys would also catch, is not modelled.
        return (tokens - 1) // self.page_tokens if self.eagle else tokens // self.page_tokens

    def start(self, seq: Seq) -> bool:
        m, node = self.match(seq.keys, self._matchable(seq.tokens))
        self._lock(node)
        need = cdiv(seq.tokens, self.page_tokens) - m
        if not self._take(need):
            self._unlock(node)
            return False
        seq.hit_pages = m
        seq.private_pages = need
        seq.handle = (node, m)
        if self.check:
            self.verify()
        return True

    def _insert_own(self, seq: Seq) -> tuple[int, _Node]:
        """Insert the sequence's whole pages and free its duplicates; returns how many whole pages it has and the
        node they end at."""
        held, protected = seq.handle
        # at most the pages it holds: the occupancy replay may count a token whose page its pending grow event has
        # not taken yet (preempted at that microsecond), a whole page it lacks when pages are 1 token
        full: int = min(self._matchable(seq.tokens), protected + seq.private_pages)
        # the path to the node it holds is its first ``protected`` keys: walked up from there, not matched again
        p, end = self.insert(seq.keys, held, protected, full)
        new = max(full - p, 0)
        dup = max(min(p, full) - protected, 0)
        # the request's pages at [protected, p) duplicate the tree's; [p, full) moved into the tree
        self.private -= dup + new
        self.free += dup
        seq.private_pages -= dup + new
        return full, end

    def commit(self, seq: Seq) -> None:
        """SGLang's cache_unfinished_req: insert now, lock the new path, unlock the old one."""
        node, _ = seq.handle
        full, last = self._insert_own(seq)
        # the path to ``last`` is the whole pages just inserted: refreshed from there up (a walk down the same
        # keys ends exactly there, at a node's end, and splits nothing)
        now = self._tick()
        self.root.last = now
        touched: list[_Node] = []
        self._touch_path(last, now, touched)
        if self.check:
            assert self._path(last) == seq.keys[:full], "commit: the inserted pages do not end at their node"
        self._lock(last)
        self._unlock(node)
        self._refresh(touched)
        seq.handle = (last, full)
        if self.check:
            self.verify()

    def grow(self, seq: Seq, pages: int) -> bool:
        # _take written out (the occupancy replay grows a running request a page at a time)
        free = self.free
        if free < pages:
            if free + self.evictable < pages:
                return False
            self.evict(pages - free)
        self.free -= pages
        self.private += pages
        seq.private_pages += pages
        return True

    def release(self, seq: Seq) -> None:
        node, _ = seq.handle
        self._insert_own(seq)
        # what is left private: the trailing partial page and anything past the whole pages
        self.private -= seq.private_pages
        self.free += seq.private_pages
        seq.private_pages = 0
        self._unlock(node)
        seq.handle = None
        if self.check:
            self.verify()

    # ------------------------------------------------------------------ invariants

    def verify(self) -> None:
        total = evictable = 0
        stack = [self.root]
        while stack:
            n = stack.pop()
            assert n.lock >= 0, "negative lock_ref"
            for k, c in n.children.items():
                assert not c.dead and c.parent is n and c.key and c.key[0] == k, "tree links broken"
                assert n is self.root or n.lock >= c.lock, "a child is locked more than its parent"
                total += len(c.key)
                if not c.lock:
                    evictable += len(c.key)
                stack.append(c)
        assert total == self.tree_pages, f"tree holds {total} pages, ledger says {self.tree_pages}"
        assert evictable == self.evictable, f"{evictable} evictable pages, ledger says {self.evictable}"
        assert min(self.free, self.private, self.tree_pages) >= 0, "a negative page count"
        assert self.free + self.tree_pages + self.private == self.pages, (
            f"free {self.free} + cached {self.tree_pages} + held {self.private} != pool {self.pages}"
        )
        live = {id(h[3]) for h in self._heap if h[2] == h[3].ver}
        stack = [self.root]
        while stack:
            n = stack.pop()
            stack.extend(n.children.values())
            if n is not self.root and not n.lock and not n.children:
                assert id(n) in live, "an unlocked leaf is missing from the eviction candidates"
