/*
 * proc.h — reading Linux /proc: per-process stat, statm and smaps(_rollup),
 * the system's meminfo, and a listing of every process with its parent.
 *
 * Role: the sampler's only source of per-process numbers. Parsing is split
 * from reading (earlyoom style): parse_*_buf() are pure functions on a
 * NUL-terminated string, testable on hostile fixtures; read_*() only open and
 * read, under an injectable proc root ("/proc" when NULL), so tests can point
 * them at t/fixtures/proc.
 *
 * Units: sizes in bytes unless the name says pages or ticks (clock ticks,
 * sysconf(_SC_CLK_TCK)). Everything here is quiet: processes vanish at any
 * moment, so readers return -1 with errno set (ENOENT/ESRCH when the process
 * is gone, EINVAL when the text did not parse) and print nothing; the caller
 * decides whether that is worth a message.
 */
#ifndef LP_PROC_H
#define LP_PROC_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PROC_ROOT_DEFAULT "/proc"
#define PROC_COMM_MAX 64        /* kernel comm is 16; longer kthread names are cut */

/* ---- /proc/PID/stat ------------------------------------------------- */

struct proc_stat {
	pid_t pid;
	char comm[PROC_COMM_MAX];   /* NUL-terminated; may hold spaces, ')' or '\n' */
	char state;                 /* 'R', 'S', 'Z', ... */
	pid_t ppid, pgrp;
	unsigned flags;             /* the kernel's PF_* flags of the task */
	uint64_t minflt, majflt;    /* page faults so far */
	uint64_t utime_ticks, stime_ticks;
	uint64_t starttime_ticks;   /* since boot */
	uint64_t rss_pages;
};
#define PROC_PF_EXITING 0x4u         /* flags: in exit(), its memory being unmapped */
/* The comm ends at the LAST ')' of the line. Returns 0, or -1 (errno
 * EINVAL) when buf is not a whole stat line up to the rss field. */
int parse_proc_stat_buf(const char *buf, struct proc_stat *out);

/* ---- /proc/PID/statm ------------------------------------------------ */

struct proc_statm {
	uint64_t size_pages;        /* virtual size; 0 for a zombie (no mm left) */
	uint64_t resident_pages;    /* RSS: anonymous + file + shmem */
	uint64_t shared_pages;      /* resident file-backed + shmem pages */
};
/* Returns 0, or -1 (errno EINVAL) for garbage or a cut line. */
int parse_proc_statm_buf(const char *buf, struct proc_statm *out);

/* ---- /proc/PID/smaps_rollup and /proc/PID/smaps ---------------------- */

struct proc_smaps {
	uint64_t rss_bytes, pss_bytes;
	uint64_t pss_anon_bytes, pss_file_bytes, pss_shmem_bytes; /* valid when has_pss_split */
	uint64_t shared_clean_bytes, shared_dirty_bytes;
	uint64_t private_clean_bytes, private_dirty_bytes;
	uint64_t swap_bytes, swap_pss_bytes;
	uint64_t anonymous_bytes;   /* resident anonymous pages, shared or not */
	bool has_pss_split;         /* Pss_Anon/Pss_File/Pss_Shmem present (Linux 5.7+) */
};
/* USS: pages only this process maps, Private_Clean + Private_Dirty. */
uint64_t proc_smaps_uss(const struct proc_smaps *sm);

/*
 * Parse smaps_rollup text, or a full smaps (every mapping's fields are
 * summed), for kernels without smaps_rollup. Unknown fields and mapping
 * header lines are skipped. Returns 0, or -1 (errno EINVAL) when there is
 * no Rss and Pss, a known field is malformed, a value overflows, or the text
 * does not end with a newline (a cut read).
 */
int parse_smaps_rollup_buf(const char *buf, struct proc_smaps *out);

/* Incremental form, for streaming a large smaps through a small buffer:
 * smaps_parser_begin(), one smaps_parser_line() per line (without its
 * newline), then smaps_parser_end(), which applies the rules above (except
 * the final newline, which only the caller can see) and fills *out. */
struct smaps_parser {
	struct proc_smaps sum;
	unsigned seen;              /* which fields were found */
	bool bad;                   /* a known field did not parse */
};
void smaps_parser_begin(struct smaps_parser *p);
void smaps_parser_line(struct smaps_parser *p, const char *line, size_t len);
int smaps_parser_end(const struct smaps_parser *p, struct proc_smaps *out);

/* ---- /proc/meminfo --------------------------------------------------- */

struct meminfo {
	uint64_t mem_total_bytes, mem_free_bytes, mem_available_bytes;
	uint64_t buffers_bytes, cached_bytes;
	uint64_t swap_total_bytes, swap_free_bytes;
	bool available_estimated;   /* no MemAvailable (before Linux 3.14):
	                               MemFree + Buffers + Cached instead */
};
/* MemTotal is required; the rest default to 0. Returns 0 or -1 (EINVAL). */
int parse_meminfo_buf(const char *buf, struct meminfo *out);

/* ---- a list of PIDs, one a line (cgroup.procs) ------------------------ */

/* Fills out[] with up to max PIDs and returns how many there were (which
 * may exceed max: the rest were not stored), or -1 (EINVAL) for a line that
 * is not a PID. Empty lines are skipped, and so is 0, which the kernel
 * writes for a process outside the reader's PID namespace. */
ssize_t parse_pid_list_buf(const char *buf, pid_t *out, size_t max);

/* ---- /proc/loadavg ---------------------------------------------------- */

/* The last field of loadavg, "0.52 0.58 0.59 3/210 81723": the PID most
 * recently handed out in the reader's PID namespace. It moves at every
 * fork() anywhere below that namespace, so an unchanged value means no
 * process was created since the last look. Returns 0 or -1 (EINVAL). */
int parse_loadavg_last_pid(const char *buf, pid_t *out);

/* ---- readers ---------------------------------------------------------- */

/* root: the proc mount, PROC_ROOT_DEFAULT when NULL. */
int read_proc_stat(const char *root, pid_t pid, struct proc_stat *out);
int read_proc_statm(const char *root, pid_t pid, struct proc_statm *out);
/* Reads smaps_rollup, or smaps when the kernel has no smaps_rollup
 * (streamed through a fixed buffer, so any size is fine). */
int read_proc_smaps(const char *root, pid_t pid, struct proc_smaps *out);
int read_meminfo(const char *root, struct meminfo *out);

/* Where the caller runs, so that a pid recorded in a shared store is read
 * only where it means the same process: the inode of the caller's PID
 * namespace (/proc/self/ns/pid), the boot's id
 * (/proc/sys/kernel/random/boot_id, 36 characters and a NUL) and the time
 * of the boot (btime of /proc/stat, wall seconds). 0, or -1 with errno. */
int proc_self_pidns(uint64_t *ino);
int read_boot_id(char *buf, size_t cap);
int read_boot_time(int64_t *btime);

/* Whether /proc/PID/environ (the environment pid was exec'd with) holds
 * entry ("NAME=VALUE") whole; false when it cannot be read. */
bool proc_environ_has(const char *root, pid_t pid, const char *entry);

/* Whether pid's memory maps, what the sampler reads, can be read: a byte
 * of /proc/PID/smaps_rollup, whose path goes into path. 0, else the errno
 * why not (EACCES or EPERM: another user's process; ENOENT or ESRCH: no such
 * process). */
int proc_maps_readable(const char *root, pid_t pid, char *path, size_t pathsz);

/* pread() /proc/PID/statm through a descriptor kept open:
 * seq files restart at offset 0, so every call returns fresh values. Fails
 * with ESRCH once the process has been reaped. */
int pread_proc_statm(int fd, struct proc_statm *out);
/* The same for /proc/PID/stat (name, parent and page faults are the
 * process's current ones, after an exec too). */
int pread_proc_stat(int fd, struct proc_stat *out);

/*
 * Walking the PIDs of the proc root. proc_opendir() returns NULL with errno
 * set; the caller closes with closedir(). proc_readdir() returns 1 with the
 * next PID and the inode of its /proc/PID directory (the same inode means
 * the same process: a reused PID gets a new inode), 0 at the end, -1 on
 * error. Non-numeric entries (self, sys, ...) are skipped. rewinddir()
 * starts a fresh walk through the same DIR.
 */
DIR *proc_opendir(const char *root);
int proc_readdir(DIR *dir, pid_t *pid, uint64_t *ino);

/* (pid, ppid) of every process. */
struct proc_entry {
	pid_t pid, ppid;
};
struct proc_list {
	struct proc_entry *v;
	size_t n, alloc;
};
#define PROC_LIST_INIT { NULL, 0, 0 }
#define PROC_LIST_MAX (1u << 22)        /* the kernel's largest pid_max */
/* Replaces list's contents (reusing its storage) with every process whose
 * stat could be read. Returns the count, or -1 with errno set. The caller
 * frees the storage with proc_list_release(). */
ssize_t proc_scan(const char *root, struct proc_list *list);
void proc_list_release(struct proc_list *list);
/* True when pid descends from ancestor in list (pid itself excluded). Stops
 * after PROC_LIST_MAX hops, so a corrupt list cannot loop forever. */
bool proc_list_descends(const struct proc_list *list, pid_t pid, pid_t ancestor);

#endif
