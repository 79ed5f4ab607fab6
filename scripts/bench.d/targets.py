#!/usr/bin/env python3
"""node_exporter-shaped scrape targets for the ingest comparison (scripts/bench).

Serves COUNT targets on consecutive ports from BASE_PORT on 127.0.0.1, each answering
`GET /metrics` with Prometheus text format 0.0.4 of exactly SERIES series laid out like
node_exporter 1.x on a Linux host (family names and label sets as in node_exporter's own
end-to-end fixture, collector/fixtures/e2e-output.txt: per-CPU time by mode, per-device disk
and network counters, filesystems, memory, netstat, vmstat, softnet, pressure, interrupts,
Go runtime summaries). Values move the way a host's do: counters grow at a per-series rate
(never reset), gauges wander around their level, so compression in both stores sees
realistic data rather than constants.

Every target serves the same series with its own values (a per-target phase), the way a fleet
of identical hosts would. The body is rebuilt on every request from precomputed series
prefixes, so the server's cost stays small beside the collectors it feeds.

Usage: targets.py BASE_PORT COUNT [SERIES]   (SERIES defaults to 1000)
Prints `ready <COUNT> targets on 127.0.0.1:<BASE_PORT>..<last>` once every port listens.
"""

import math
import random
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CPUS = 8
CPU_MODES = ["idle", "iowait", "irq", "nice", "softirq", "steal", "system", "user"]
DISKS = ["nvme0n1", "nvme1n1", "sda", "sdb"]
DISK_COUNTERS = [
    "node_disk_discard_time_seconds_total", "node_disk_discarded_sectors_total",
    "node_disk_discards_completed_total", "node_disk_discards_merged_total",
    "node_disk_flush_requests_time_seconds_total", "node_disk_flush_requests_total",
    "node_disk_io_time_seconds_total", "node_disk_io_time_weighted_seconds_total",
    "node_disk_read_bytes_total", "node_disk_read_time_seconds_total",
    "node_disk_reads_completed_total", "node_disk_reads_merged_total",
    "node_disk_write_time_seconds_total", "node_disk_writes_completed_total",
    "node_disk_writes_merged_total", "node_disk_written_bytes_total",
]
INTERFACES = ["eth0", "eth1", "lo", "docker0"]
NET_COUNTERS = [
    "node_network_receive_bytes_total", "node_network_receive_compressed_total",
    "node_network_receive_drop_total", "node_network_receive_errs_total",
    "node_network_receive_fifo_total", "node_network_receive_frame_total",
    "node_network_receive_multicast_total", "node_network_receive_packets_total",
    "node_network_transmit_bytes_total", "node_network_transmit_carrier_total",
    "node_network_transmit_colls_total", "node_network_transmit_compressed_total",
    "node_network_transmit_drop_total", "node_network_transmit_errs_total",
    "node_network_transmit_fifo_total", "node_network_transmit_packets_total",
]
FILESYSTEMS = [
    ("/dev/nvme0n1p1", "ext4", "/"), ("/dev/nvme0n1p2", "ext4", "/var"),
    ("/dev/nvme1n1", "xfs", "/data"), ("tmpfs", "tmpfs", "/run"),
    ("tmpfs", "tmpfs", "/dev/shm"), ("/dev/sda1", "vfat", "/boot/efi"),
]
FS_GAUGES = [
    "node_filesystem_avail_bytes", "node_filesystem_device_error", "node_filesystem_files",
    "node_filesystem_files_free", "node_filesystem_free_bytes", "node_filesystem_readonly",
    "node_filesystem_size_bytes",
]
MEMORY = [
    "Active", "Active_anon", "Active_file", "AnonHugePages", "AnonPages", "Bounce", "Buffers",
    "Cached", "CommitLimit", "Committed_AS", "DirectMap1G", "DirectMap2M", "DirectMap4k",
    "Dirty", "HardwareCorrupted", "HugePages_Free", "HugePages_Rsvd", "HugePages_Surp",
    "HugePages_Total", "Hugepagesize", "Inactive", "Inactive_anon", "Inactive_file",
    "KernelStack", "Mapped", "MemAvailable", "MemFree", "MemTotal", "Mlocked", "NFS_Unstable",
    "PageTables", "SReclaimable", "SUnreclaim", "Shmem", "ShmemHugePages", "ShmemPmdMapped",
    "Slab", "SwapCached", "SwapFree", "SwapTotal", "Unevictable", "VmallocChunk",
    "VmallocTotal", "VmallocUsed", "Writeback", "WritebackTmp", "Percpu", "KReclaimable",
]
NETSTAT = [
    "Icmp_InErrors", "Icmp_InMsgs", "Icmp_OutMsgs", "Icmp6_InErrors", "Icmp6_InMsgs",
    "Icmp6_OutMsgs", "Ip_Forwarding", "Ip6_InOctets", "Ip6_OutOctets", "IpExt_InOctets",
    "IpExt_OutOctets", "TcpExt_ListenDrops", "TcpExt_ListenOverflows", "TcpExt_SyncookiesFailed",
    "TcpExt_SyncookiesRecv", "TcpExt_SyncookiesSent", "TcpExt_TCPSynRetrans",
    "TcpExt_TCPTimeouts", "Tcp_ActiveOpens", "Tcp_CurrEstab", "Tcp_InErrs", "Tcp_InSegs",
    "Tcp_OutRsts", "Tcp_OutSegs", "Tcp_PassiveOpens", "Tcp_RetransSegs", "Udp6_InDatagrams",
    "Udp6_InErrors", "Udp6_NoPorts", "Udp6_OutDatagrams", "Udp6_RcvbufErrors",
    "Udp6_SndbufErrors", "UdpLite6_InErrors", "UdpLite_InErrors", "Udp_InDatagrams",
    "Udp_InErrors", "Udp_NoPorts", "Udp_OutDatagrams", "Udp_RcvbufErrors", "Udp_SndbufErrors",
]
VMSTAT = ["oom_kill", "pgfault", "pgmajfault", "pgpgin", "pgpgout", "pswpin", "pswpout"]
PRESSURE = [
    ("node_pressure_cpu_waiting_seconds_total", "counter"),
    ("node_pressure_io_stalled_seconds_total", "counter"),
    ("node_pressure_io_waiting_seconds_total", "counter"),
    ("node_pressure_memory_stalled_seconds_total", "counter"),
    ("node_pressure_memory_waiting_seconds_total", "counter"),
]
INTERRUPT_TYPES = [
    ("0", "IO-APIC-edge", "timer"), ("1", "IO-APIC-edge", "i8042"),
    ("8", "IO-APIC-edge", "rtc0"), ("9", "IO-APIC-fasteoi", "acpi"),
    ("24", "PCI-MSI-edge", "nvme0q0"), ("25", "PCI-MSI-edge", "nvme0q1"),
    ("26", "PCI-MSI-edge", "nvme1q0"), ("27", "PCI-MSI-edge", "eth0-TxRx-0"),
    ("28", "PCI-MSI-edge", "eth0-TxRx-1"), ("29", "PCI-MSI-edge", "eth1-TxRx-0"),
    ("LOC", "Local timer interrupts", ""), ("RES", "Rescheduling interrupts", ""),
    ("CAL", "Function call interrupts", ""), ("TLB", "TLB shootdowns", ""),
    ("NMI", "Non-maskable interrupts", ""), ("PMI", "Performance monitoring interrupts", ""),
    ("IWI", "IRQ work interrupts", ""), ("MCP", "Machine check polls", ""),
    ("SPU", "Spurious interrupts", ""), ("THR", "Threshold APIC interrupts", ""),
]


class Family:
    """One metric family: its HELP/TYPE header and its series (text prefix, counter?, level, rate)."""

    def __init__(self, name, kind, help_text):
        self.header = f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n"
        self.series = []

    def add(self, prefix, counter, rng):
        level = 10 ** rng.uniform(0, 9)
        rate = level * rng.uniform(1e-4, 1e-2) if counter else 0.0
        self.series.append((prefix, counter, level, rate))


def labels(**pairs):
    inner = ",".join(f'{key}="{value}"' for key, value in pairs.items())
    return "{" + inner + "}" if inner else ""


def families(series_wanted, seed):
    """The family list, padded (or cut) with interrupt series to exactly `series_wanted` series."""
    rng = random.Random(seed)
    out = []

    def family(name, kind, help_text, label_sets, counter):
        fam = Family(name, kind, help_text)
        for pairs in label_sets:
            fam.add(name + labels(**pairs) + " ", counter, rng)
        out.append(fam)

    family("node_cpu_seconds_total", "counter", "Seconds the CPUs spent in each mode.",
           [{"cpu": str(cpu), "mode": mode} for cpu in range(CPUS) for mode in CPU_MODES], True)
    for name in DISK_COUNTERS:
        family(name, "counter", "Disk statistic from /proc/diskstats.",
               [{"device": device} for device in DISKS], True)
    family("node_disk_io_now", "gauge", "The number of I/Os currently in progress.",
           [{"device": device} for device in DISKS], False)
    for name in NET_COUNTERS:
        family(name, "counter", "Network device statistic from /proc/net/dev.",
               [{"device": device} for device in INTERFACES], True)
    for name in FS_GAUGES:
        family(name, "gauge", "Filesystem statistic from statfs.",
               [{"device": d, "fstype": t, "mountpoint": m} for d, t, m in FILESYSTEMS], False)
    for field in MEMORY:
        family(f"node_memory_{field}_bytes", "gauge", f"Memory information field {field}_bytes.",
               [{}], False)
    for field in NETSTAT:
        family(f"node_netstat_{field}", "untyped", f"Statistic {field}.", [{}], True)
    for field in VMSTAT:
        family(f"node_vmstat_{field}", "untyped", f"/proc/vmstat information field {field}.",
               [{}], True)
    for name, kind in PRESSURE:
        family(name, kind, "Pressure stall information from /proc/pressure.", [{}], True)
    for name in ["node_load1", "node_load5", "node_load15"]:
        family(name, "gauge", "Load average.", [{}], False)
    for name in ["node_softnet_dropped_total", "node_softnet_processed_total",
                 "node_softnet_times_squeezed_total"]:
        family(name, "counter", "Softnet statistic from /proc/net/softnet_stat.",
               [{"cpu": str(cpu)} for cpu in range(CPUS)], True)
    for name in ["node_schedstat_running_seconds_total", "node_schedstat_timeslices_total",
                 "node_schedstat_waiting_seconds_total"]:
        family(name, "counter", "Scheduler statistic from /proc/schedstat.",
               [{"cpu": str(cpu)} for cpu in range(CPUS)], True)
    gc = Family("go_gc_duration_seconds", "summary", "A summary of the pause duration of GC cycles.")
    for quantile in ["0", "0.25", "0.5", "0.75", "1"]:
        gc.add(f'go_gc_duration_seconds{{quantile="{quantile}"}} ', False, rng)
    gc.add("go_gc_duration_seconds_sum ", True, rng)
    gc.add("go_gc_duration_seconds_count ", True, rng)
    out.append(gc)
    for name, counter in [("go_goroutines", False), ("go_threads", False),
                          ("process_cpu_seconds_total", True), ("process_open_fds", False),
                          ("process_resident_memory_bytes", False),
                          ("process_start_time_seconds", False)]:
        family(name, "counter" if counter else "gauge", f"Process statistic {name}.", [{}], counter)

    have = sum(len(fam.series) for fam in out)
    if have > series_wanted:
        raise SystemExit(f"targets.py: SERIES must be at least {have} (the fixed families)")
    interrupts = Family("node_interrupts_total", "counter", "Interrupt details.")
    index = 0
    while have + len(interrupts.series) < series_wanted:
        cpu, irq = index % CPUS, index // CPUS
        if irq < len(INTERRUPT_TYPES):
            number, kind, devices = INTERRUPT_TYPES[irq]
        else:
            number, kind, devices = str(irq + 10), "PCI-MSI-edge", f"eth0-TxRx-{irq}"
        interrupts.add("node_interrupts_total"
                       + labels(cpu=str(cpu), devices=devices, info=kind, type=number) + " ",
                       True, rng)
        index += 1
    out.append(interrupts)
    return out


def body(fams, phase, now):
    """The exposition at wall time `now` (seconds) for a target with `phase` (radians)."""
    parts = []
    for fam in fams:
        parts.append(fam.header)
        for prefix, counter, level, rate in fam.series:
            if counter:
                value = level + rate * now
            else:
                value = level * (1.0 + 0.05 * math.sin(now / 60.0 + phase + level))
            parts.append(f"{prefix}{value!r}\n")
    return "".join(parts).encode()


def serve(port, fams, phase):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):  # noqa: N802 (http.server's naming)
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            payload = body(fams, phase, time.time() - START)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()


START = time.time() - 1_000_000.0  # counters start well above zero, as on a host up for days

if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__)
    base_port, count = int(sys.argv[1]), int(sys.argv[2])
    series = int(sys.argv[3]) if len(sys.argv) == 4 else 1000
    fams = families(series, seed=19)
    assert sum(len(fam.series) for fam in fams) == series
    for offset in range(count):
        serve(base_port + offset, fams, phase=offset * 0.7)
    print(f"ready {count} targets on 127.0.0.1:{base_port}..{base_port + count - 1}", flush=True)
    threading.Event().wait()
