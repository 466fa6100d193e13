// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * bee-probe: one operation, its outcome as the exit status. Built static
 * (`cc -static`, by `cargo xtask vm test -p bee` and `cargo xtask test` for
 * the VM, and by tests/landlock_conformance.rs for the native run) so
 * that a conformance case's policy needs to grant nothing but the probe
 * itself to run it: no dynamic loader, no shared libraries.
 *
 *   bee-probe OP ARGS...
 *   bee-probe batch FILE
 *
 * Exit status: 0 when the operation succeeded, else its errno (EPERM is 1,
 * EACCES 13), 100 for a usage error. `batch` runs each line of FILE (the
 * operation and its arguments, separated by tabs) in a child process of its
 * own and prints each one's status on a line of stdout, in order: one scope,
 * one engine load, many cases. The operations are the ones the
 * conformance cases (the TOML files beside this one) need; each is one system call
 * after any setup that cannot itself be denied (socket(2) of an allowed
 * family, an O_PATH open).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static int outcome(int rc)
{
	return rc < 0 ? errno : 0;
}

static int open_close(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC, 0644);

	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

static int tcp_connect(const char *host, const char *port, int family)
{
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int rc;

	if (fd < 0)
		return errno;
	if (family == AF_INET6) {
		struct sockaddr_in6 a = {.sin6_family = AF_INET6,
					 .sin6_port = htons((unsigned short)atoi(port))};

		inet_pton(AF_INET6, host, &a.sin6_addr);
		rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
	} else {
		struct sockaddr_in a = {.sin_family = AF_INET,
					.sin_port = htons((unsigned short)atoi(port))};

		inet_pton(AF_INET, host, &a.sin_addr);
		rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
	}
	rc = outcome(rc);
	close(fd);
	/* Nothing listens: the kernel's own refusal means the check let it pass. */
	return rc == ECONNREFUSED ? 0 : rc;
}

/* connect(AF_UNSPEC) on a connected UDP socket: a disconnect. */
static int udp_disconnect(const char *host, const char *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((unsigned short)atoi(port))};
	struct sockaddr unspec = {.sa_family = AF_UNSPEC};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int rc;

	if (fd < 0)
		return errno;
	inet_pton(AF_INET, host, &a.sin_addr);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		rc = errno;
		close(fd);
		return rc;
	}
	rc = outcome(connect(fd, &unspec, sizeof(unspec)));
	close(fd);
	return rc;
}

static int unix_connect(const char *name, int abstract)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	socklen_t len;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int rc;

	if (fd < 0)
		return errno;
	if (strlen(name) + 2 > sizeof(a.sun_path))
		return 100;
	if (abstract) {
		strcpy(a.sun_path + 1, name);
		len = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name);
	} else {
		strcpy(a.sun_path, name);
		len = sizeof(a);
	}
	rc = outcome(connect(fd, (struct sockaddr *)&a, len));
	close(fd);
	return rc;
}

/* Reopens `path` through /proc/self/fd of an O_PATH descriptor. */
static int proc_fd_reopen(const char *path)
{
	char link[64];
	int fd = open(path, O_PATH | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return errno;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	rc = open_close(link, O_RDONLY);
	close(fd);
	return rc;
}

/* Connects a UDP socket: the peer a datagram would go to. */
static int udp_connect(const char *host, const char *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((unsigned short)atoi(port))};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int rc;

	if (fd < 0)
		return errno;
	inet_pton(AF_INET, host, &a.sin_addr);
	rc = outcome(connect(fd, (struct sockaddr *)&a, sizeof(a)));
	close(fd);
	return rc;
}

/* Opens `rel` relative to an O_PATH descriptor of `dir`. */
static int read_at(const char *dir, const char *rel)
{
	int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	int fd, rc;

	if (dfd < 0)
		return errno;
	fd = openat(dfd, rel, O_RDONLY | O_CLOEXEC);
	rc = fd < 0 ? errno : 0;
	if (fd >= 0)
		close(fd);
	close(dfd);
	return rc;
}

/* Truncates through a descriptor opened for writing. */
static int ftruncate_path(const char *path)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return errno;
	rc = outcome(ftruncate(fd, 0));
	close(fd);
	return rc;
}

/* Opens the write end of a pipe again through /proc/self/fd. */
static int proc_pipe(void)
{
	char link[64];
	int fds[2], rc;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return errno;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fds[1]);
	rc = open_close(link, O_WRONLY);
	close(fds[0]);
	close(fds[1]);
	return rc;
}

/* A child of the probe's own, stopped in pause(2), for the signal and ptrace cases. */
static pid_t own_child(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		pause();
		_exit(0);
	}
	return pid;
}

static int ptrace_attach(pid_t pid)
{
	int status;

	if (ptrace(PTRACE_ATTACH, pid, 0, 0) < 0)
		return errno;
	waitpid(pid, &status, 0);
	ptrace(PTRACE_DETACH, pid, 0, 0);
	return 0;
}

static int run(int argc, char **argv);

/* Signals or traces a child of the probe's own; the child is killed afterwards. */
static int own_child_op(int trace, int sig)
{
	pid_t pid = own_child();
	int rc;

	if (pid < 0)
		return errno;
	rc = trace ? ptrace_attach(pid) : outcome(kill(pid, sig));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return rc;
}

/* Runs every line of `path` in a child; prints each status. */
static int batch(const char *path)
{
	static char line[8192];
	FILE *f = fopen(path, "re");

	if (!f)
		return errno;
	while (fgets(line, sizeof(line), f)) {
		char *args[16] = {"bee-probe"};
		int n = 1, status = 0;
		pid_t pid;

		line[strcspn(line, "\n")] = '\0';
		for (char *tok = strtok(line, "\t"); tok && n < 15; tok = strtok(NULL, "\t"))
			args[n++] = tok;
		args[n] = NULL;
		fflush(stdout);
		pid = fork();
		if (pid < 0)
			return errno;
		if (pid == 0)
			_exit(run(n, args));
		if (waitpid(pid, &status, 0) < 0)
			return errno;
		printf("%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	}
	fclose(f);
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "batch"))
		return batch(argv[2]);
	return run(argc, argv);
}

static int run(int argc, char **argv)
{
	const char *op = argc > 1 ? argv[1] : "";
	const char *a = argc > 2 ? argv[2] : "";
	const char *b = argc > 3 ? argv[3] : "";

	if (!strcmp(op, "read") && argc == 3)
		return open_close(a, O_RDONLY);
	if (!strcmp(op, "write") && argc == 3)
		return open_close(a, O_WRONLY);
	if (!strcmp(op, "read-trunc") && argc == 3)
		return open_close(a, O_RDONLY | O_TRUNC);
	if (!strcmp(op, "create") && argc == 3)
		return open_close(a, O_WRONLY | O_CREAT | O_EXCL);
	if (!strcmp(op, "truncate") && argc == 3)
		return outcome(truncate(a, 0));
	if (!strcmp(op, "mkdir") && argc == 3)
		return outcome(mkdir(a, 0755));
	if (!strcmp(op, "rmdir") && argc == 3)
		return outcome(rmdir(a));
	if (!strcmp(op, "unlink") && argc == 3)
		return outcome(unlink(a));
	if (!strcmp(op, "mkfifo") && argc == 3)
		return outcome(mknod(a, S_IFIFO | 0644, 0));
	if (!strcmp(op, "mkchar") && argc == 3)
		return outcome(mknod(a, S_IFCHR | 0644, makedev(1, 3)));
	if (!strcmp(op, "symlink") && argc == 4)
		return outcome(symlink(a, b));
	if (!strcmp(op, "link") && argc == 4)
		return outcome(link(a, b));
	if (!strcmp(op, "rename") && argc == 4)
		return outcome(rename(a, b));
	if (!strcmp(op, "exchange") && argc == 4)
		return outcome(renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE));
	if (!strcmp(op, "exec") && argc >= 3) {
		execv(a, argv + 2);
		/* A text file without #!: the kernel's own refusal, past every check. */
		return errno == ENOEXEC ? 0 : errno;
	}
	if (!strcmp(op, "proc-fd-reopen") && argc == 3)
		return proc_fd_reopen(a);
	if (!strcmp(op, "tcp4") && argc == 4)
		return tcp_connect(a, b, AF_INET);
	if (!strcmp(op, "tcp6") && argc == 4)
		return tcp_connect(a, b, AF_INET6);
	if (!strcmp(op, "udp-disconnect") && argc == 4)
		return udp_disconnect(a, b);
	if (!strcmp(op, "unix-abstract") && argc == 3)
		return unix_connect(a, 1);
	if (!strcmp(op, "unix-path") && argc == 3)
		return unix_connect(a, 0);
	if (!strcmp(op, "kill") && argc == 4)
		return outcome(kill((pid_t)atoi(a), atoi(b)));
	if (!strcmp(op, "ftruncate") && argc == 3)
		return ftruncate_path(a);
	if (!strcmp(op, "proc-pipe") && argc == 2)
		return proc_pipe();
	if (!strcmp(op, "read-at") && argc == 4)
		return read_at(a, b);
	if (!strcmp(op, "udp4") && argc == 4)
		return udp_connect(a, b);
	if (!strcmp(op, "kill-self") && argc == 3)
		return outcome(kill(getpid(), atoi(a)));
	if (!strcmp(op, "kill-child") && argc == 3)
		return own_child_op(0, atoi(a));
	if (!strcmp(op, "ptrace-child") && argc == 2)
		return own_child_op(1, 0);
	if (!strcmp(op, "ptrace") && argc == 3)
		return ptrace_attach((pid_t)atoi(a));
	fprintf(stderr, "bee-probe: unknown operation or arguments: %s\n", op);
	return 100;
}
