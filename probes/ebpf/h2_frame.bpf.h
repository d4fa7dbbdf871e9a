// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* HTTP/2 framing (RFC 9113, section 4 and 6) shared by the endpoint
 * programs (http2.bpf.h, the server's side) and the dependency programs
 * (dependency_http2.bpf.h, the client's side). */
#ifndef HEADROOM_PROBES_EBPF_H2_FRAME_BPF_H
#define HEADROOM_PROBES_EBPF_H2_FRAME_BPF_H

#define H2_PREFACE_LEN 24

#define H2_DATA 0
#define H2_HEADERS 1
#define H2_PRIORITY 2
#define H2_RST_STREAM 3
#define H2_SETTINGS 4
#define H2_PUSH_PROMISE 5
#define H2_PING 6
#define H2_GOAWAY 7
#define H2_WINDOW_UPDATE 8
#define H2_CONTINUATION 9

#define H2_F_END_STREAM 0x1
#define H2_F_END_HEADERS 0x4
#define H2_F_PADDED 0x8
#define H2_F_PRIORITY 0x20

/* Whether a frame header can be HTTP/2's (RFC 9113, section 6). */
static __always_inline int h2_plausible(__u32 len, __u8 type, __u32 sid, __u8 flags) {
  switch (type) {
    case H2_DATA: case H2_HEADERS: case H2_CONTINUATION: return sid != 0;
    case H2_PRIORITY: return sid != 0 && len == 5;
    case H2_RST_STREAM: return sid != 0 && len == 4;
    case H2_SETTINGS: return sid == 0 && len % 6 == 0 && (!(flags & 1) || len == 0);
    case H2_PUSH_PROMISE: return sid != 0 && len >= 4;
    case H2_PING: return sid == 0 && len == 8;
    case H2_GOAWAY: return sid == 0 && len >= 8;
    case H2_WINDOW_UPDATE: return len == 4;
    default: return type <= 0x10; /* extension frames (ALTSVC, ORIGIN, PRIORITY_UPDATE) */
  }
}

#endif
