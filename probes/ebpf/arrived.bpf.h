// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* The bytes that just reached a socket, from its receive queue's last
 * buffer, for the programs that run on sock:sk_data_ready: the endpoint
 * socket set (a request's end, http1.bpf.h) and the dependency programs (an
 * answer's status line). Included after vmlinux.h and the BPF helpers, by
 * one program file each (the globals below are that object's own). */
#ifndef HEADROOM_PROBES_EBPF_ARRIVED_BPF_H
#define HEADROOM_PROBES_EBPF_ARRIVED_BPF_H

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

/* Where the bytes that just arrived are. On loopback and
 * with most network drivers they sit in page fragments of the socket's last
 * buffer (struct sk_buff): a page's address in the kernel's direct map is
 * dmap_base + page pointer * (page size / sizeof(struct page)), where
 * dmap_base is learnt once from a slab (dmap_learn). 0: not known. */
__u64 dmap_base = 0;
__u32 dmap_attempts = 0;
#define HR_DMAP_ATTEMPTS 100000

/* dmap_base from a slab: the page of a slab on its cache's partial list,
 * and the address of a free object in it (rounded down to the slab's size:
 * the slab's own address). 0: not known from this one. All addresses are
 * read as numbers (bpf_probe_read_kernel). */
static __always_inline __u64 dmap_from(__u64 cache, __u32 order, __u64 entry) {
  const __u64 slab = entry - bpf_core_field_offset(struct slab, slab_list);
  __u64 owner = 0, free = 0;
  if (bpf_probe_read_kernel(&owner, 8, (void *)(slab + bpf_core_field_offset(struct slab, slab_cache))) ||
      owner != cache || bpf_probe_read_kernel(&free, 8, (void *)(slab + bpf_core_field_offset(struct slab, freelist))) ||
      !free)
    return 0;
  const __u32 page_size = bpf_core_type_size(struct page);
  if (order > 10 || page_size == 0 || (page_size & (page_size - 1)) || page_size > 4096) return 0;
  const __u64 start = free & ~((4096ull << order) - 1);
  return start - slab * (4096 / page_size);
}

/* dmap_base from the first and the last slab on the partial list of cache
 * (order: of its slabs): two different slabs that give the same base. */
static __always_inline __u64 dmap_of_cache(__u64 cache, __u32 order) {
  __u64 node = 0, first = 0, last = 0;
  if (!cache || bpf_probe_read_kernel(&node, 8, (void *)(cache + bpf_core_field_offset(struct kmem_cache, node))) ||
      !node)
    return 0;
  const __u64 head = node + bpf_core_field_offset(struct kmem_cache_node, partial);
  if (bpf_probe_read_kernel(&first, 8, (void *)head) || bpf_probe_read_kernel(&last, 8, (void *)(head + 8))) return 0;
  if (!first || !last || first == last || first == head || last == head) return 0;
  const __u64 a = dmap_from(cache, order, first), b = dmap_from(cache, order, last);
  return a == b ? a : 0;
}

/* Learns dmap_base from the socket's own cache, else from its protocol's
 * time-wait cache (which keeps many partial slabs). */
static __noinline void dmap_learn(const struct sock *sk) {
  dmap_attempts++;
  const struct proto *prot = sk->sk_prot_creator;
  const struct kmem_cache *c = prot->slab;
  __u64 cache = 0, base = 0; /* the caches' addresses as numbers */
  if (c && !bpf_probe_read_kernel(&cache, 8, &prot->slab)) base = dmap_of_cache(cache, c->oo.x >> 16);
  const struct timewait_sock_ops *tw = prot->twsk_prot;
  if (!base && tw && tw->twsk_slab && !bpf_probe_read_kernel(&cache, 8, &tw->twsk_slab))
    base = dmap_of_cache(cache, tw->twsk_slab->oo.x >> 16);
  if (base) dmap_base = base;
}

/* The address of the last n bytes that reached sk, when they are in one
 * piece of memory, else 0. */
static __always_inline __u64 arrived_bytes(const struct sock *sk, __u32 n) {
  const struct sk_buff *skb = sk->sk_receive_queue.prev;
  if (!skb || (const void *)skb == (const void *)&sk->sk_receive_queue) return 0;
  const __u32 len = skb->len, data_len = skb->data_len;
  if (n == 0 || n > len) return 0;
  if (data_len == 0) { /* all in the buffer's own memory (a read: the address as a number) */
    __u64 data = 0;
    if (bpf_probe_read_kernel(&data, sizeof data, &skb->data)) return 0;
    return data + len - n;
  }
  const __u64 base = dmap_base;
  if (!base) {
    if (dmap_attempts < HR_DMAP_ATTEMPTS) dmap_learn(sk);
    return 0;
  }
  const struct skb_shared_info *sh =
      bpf_rdonly_cast(skb->head + skb->end, bpf_core_type_id_kernel(struct skb_shared_info));
  const __u32 nr = sh->nr_frags;
  if (nr == 0 || nr > 32 || sh->frag_list) return 0;
  /* The last fragment, by plain loads (a typed view of its address). */
  const struct skb_frag *f =
      bpf_rdonly_cast(skb->head + skb->end + bpf_core_field_offset(struct skb_shared_info, frags) +
                          (__u64)(nr - 1) * bpf_core_type_size(struct skb_frag),
                      bpf_core_type_id_kernel(struct skb_frag));
  const __u64 netmem = f->netmem;
  const __u32 flen = f->len;
  if (flen < n || (netmem & 1)) return 0; /* spread over fragments; memory that is not a page */
  return base + netmem * (4096 / bpf_core_type_size(struct page)) + f->offset + flen - n;
}

#endif
