/*
 * p4_build.c — a P4 program's data path, from JSON to the two objects the
 * targets load, without rebuilding innet: generate the C source (p4_gen.c),
 * then compile it with the system's compilers into a cache
 *
 *   <cache>/<key>/dp.c        the generated source (kept: it is what ran)
 *                 dp.so       the user-space data path (cc -shared, under the
 *                             contract: freestanding, 512-byte frames, only
 *                             innet_* and mem* undefined, no writable global)
 *                 dp.bpf.o    the XDP object (clang -target bpf over the
 *                             template src/targets/xdp/prog.bpf.c, as the build does)
 *                 build.log   what the compilers said
 *
 * keyed by a SHA-256 of the generated source, innet's version and the
 * headers the data path is compiled against (so a changed generator or
 * engine is a new key; generating takes milliseconds). A key directory appears whole or not at all (built under a
 * temporary name, then renamed); concurrent loads of one program share it.
 *
 * Where things are found: the cache is $INNET_P4_CACHE, else
 * $XDG_CACHE_HOME/innet/p4, else ~/.cache/innet/p4; the headers are under
 * $INNET_DP_DIR, else the source tree innet was built from (in-tree), else
 * the share directory `make install` fills (PREFIX/share/innet/dp); the
 * compilers are $INNET_CC (default cc) and $INNET_BPF_CLANG (default clang).
 * The same mechanism compiles any NAME_dp.c at run time (issue 19).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <gelf.h>
#include <libelf.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "innet/clock.h"
#include "innet/version.h"
#include "p4/p4.h"

extern char **environ;

#ifndef INNET_SRC_DIR
#define INNET_SRC_DIR ""
#endif
#ifndef INNET_SHARE_DIR
#define INNET_SHARE_DIR "/usr/local/share/innet/dp"
#endif
#ifndef INNET_INC_DIR
#define INNET_INC_DIR "/usr/local/include"
#endif

/* The files a data path is compiled against: the public headers (under the
 * include directory) and the dp tree's (the source tree, or what `make
 * install` puts in DPDIR: the Makefile's DP_TREE and P4_DP_TREE). */
static const char *const inc_files[] = {
	"innet/dp.h", "innet/dp_user.h",
};
static const char *const dp_files[] = {
	"src/targets/xdp/prog.bpf.c", "src/targets/xdp/engine.bpf.h", "src/targets/xdp/dp_xdp.h",
	"src/targets/xdp/xdp_abi.h", "src/engine/table_algo.h",
	"src/p4/p4rt_dp.h", "src/p4/p4rt_state.h", "src/p4/p4rt_pipe.h",
};

/* The public headers beside a dp tree: its include/ in a source tree, else
 * where `make install` put them. */
static void inc_dir(const char *dpdir, char *out, size_t n)
{
	char probe[4096];
	snprintf(probe, sizeof(probe), "%s/include/innet/dp.h", dpdir);
	struct stat st;
	if (stat(probe, &st) == 0)
		snprintf(out, n, "%s/include", dpdir);
	else
		snprintf(out, n, "%s", INNET_INC_DIR);
}

static bool exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* The dp tree: where include/innet/dp.h and src/targets/xdp/prog.bpf.c are. */
int p4_dp_dir(char *out, size_t n)
{
	const char *env = getenv("INNET_DP_DIR");
	const char *cands[] = { env, INNET_SRC_DIR, INNET_SHARE_DIR };
	for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++) {
		if (cands[i] == NULL || cands[i][0] == '\0')
			continue;
		char probe[4096];
		snprintf(probe, sizeof(probe), "%s/src/p4/p4rt_pipe.h", cands[i]);
		if (exists(probe)) {
			snprintf(out, n, "%s", cands[i]);
			return 0;
		}
		if (i == 0) /* an explicit dir that lacks them is an error */
			return -ENOENT;
	}
	return -ENOENT;
}

static int cache_dir(char *out, size_t n)
{
	const char *env = getenv("INNET_P4_CACHE");
	if (env != NULL && env[0] != '\0') {
		snprintf(out, n, "%s", env);
		return 0;
	}
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	if (xdg != NULL && xdg[0] == '/')
		snprintf(out, n, "%s/innet/p4", xdg);
	else if (home != NULL && home[0] == '/')
		snprintf(out, n, "%s/.cache/innet/p4", home);
	else
		snprintf(out, n, "/tmp/innet-p4-cache-%u", (unsigned)getuid());
	return 0;
}

/* mkdir -p */
static int mkdirs(const char *path)
{
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) != 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0755) != 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int write_file(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	if (f == NULL)
		return -errno;
	bool ok = fwrite(data, 1, len, f) == len;
	ok &= fclose(f) == 0;
	return ok ? 0 : -EIO;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

/* rm -r path (a temporary build directory). */
static void rm_tree(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Run argv (stdout and stderr appended to log); the exit status, or -errno. */
static int run(char *const argv[], const char *log)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	pid_t pid;
	int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0)
		return -rc;
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* The first line of cmd's output (popen), trimmed. */
static int capture(const char *cmd, char *out, size_t n)
{
	FILE *f = popen(cmd, "r");
	if (f == NULL)
		return -errno;
	out[0] = '\0';
	if (fgets(out, (int)n, f) == NULL)
		out[0] = '\0';
	int st = pclose(f);
	size_t l = strlen(out);
	while (l > 0 && (out[l - 1] == '\n' || out[l - 1] == '\r'))
		out[--l] = '\0';
	return (st == 0 && l > 0) ? 0 : -ENOENT;
}

/* The last lines of a log file, for a message. */
static void log_tail(const char *log, char *out, size_t n)
{
	out[0] = '\0';
	FILE *f = fopen(log, "r");
	if (f == NULL)
		return;
	char buf[8192];
	size_t len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = '\0';
	/* the first error line is the useful one */
	char *e = strstr(buf, "error");
	const char *from = e ? e : (len > n ? buf + len - n + 1 : buf);
	while (e && e > buf && e[-1] != '\n')
		e--;
	if (e)
		from = e;
	size_t fl = strlen(from);
	if (fl >= n)
		fl = n - 1;
	memcpy(out, from, fl);
	out[fl] = '\0';
	char *nl = out;
	for (int lines = 0; (nl = strchr(nl, '\n')) != NULL; nl++)
		if (++lines == 4) {
			*nl = '\0';
			break;
		}
}

/* The contract on the user-space object: the undefined symbols are innet_*
 * (and mem*, which a compiler emits for copies), and nothing is writable
 * data. 0, or -EINVAL with the offending symbol in err. */
static int check_contract(const char *so, char *err, size_t errlen)
{
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	int fd = open(so, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	int rc = 0;
	Elf_Scn *scn = NULL;
	while (e != NULL && rc == 0 && (scn = elf_nextscn(e, scn)) != NULL) {
		GElf_Shdr sh;
		if (gelf_getshdr(scn, &sh) == NULL || sh.sh_type != SHT_DYNSYM)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		size_t n = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
		for (size_t i = 1; d != NULL && i < n; i++) {
			GElf_Sym sym;
			if (gelf_getsym(d, (int)i, &sym) == NULL)
				continue;
			const char *name = elf_strptr(e, sh.sh_link, sym.st_name);
			if (name == NULL || name[0] == '\0')
				continue;
			if (sym.st_shndx == SHN_UNDEF) {
				if (strncmp(name, "innet_", 6) != 0 && strncmp(name, "mem", 3) != 0 &&
				    GELF_ST_BIND(sym.st_info) != STB_WEAK) {
					snprintf(err, errlen, "the generated data path calls '%s', which is not "
						 "innet's API", name);
					rc = -EINVAL;
					break;
				}
			} else if (GELF_ST_TYPE(sym.st_info) == STT_OBJECT) {
				snprintf(err, errlen, "the generated data path defines a global '%s'", name);
				rc = -EINVAL;
				break;
			}
		}
	}
	if (e != NULL)
		elf_end(e);
	close(fd);
	return rc;
}

/* The cache key: SHA-256 over the source, the versions, the dp tree's files. */
static int build_key(const char *json, size_t len, const char *dpdir, char *hex, char *err, size_t errlen)
{
	if (sodium_init() < 0) {
		snprintf(err, errlen, "libsodium failed to initialise");
		return -EIO;
	}
	crypto_hash_sha256_state h;
	crypto_hash_sha256_init(&h);
	char ver[128];
	snprintf(ver, sizeof(ver), "innet %s gen %u\n", INNET_VERSION_STRING, P4_GEN_VERSION);
	crypto_hash_sha256_update(&h, (const unsigned char *)ver, strlen(ver));
	crypto_hash_sha256_update(&h, (const unsigned char *)json, len);
	char incdir[2100];
	inc_dir(dpdir, incdir, sizeof(incdir));
	size_t n_inc = sizeof(inc_files) / sizeof(inc_files[0]);
	for (size_t i = 0; i < n_inc + sizeof(dp_files) / sizeof(dp_files[0]); i++) {
		char path[4096];
		if (i < n_inc)
			snprintf(path, sizeof(path), "%s/%s", incdir, inc_files[i]);
		else
			snprintf(path, sizeof(path), "%s/%s", dpdir, dp_files[i - n_inc]);
		FILE *f = fopen(path, "rb");
		if (f == NULL) {
			snprintf(err, errlen, "%s: %s (the data path's headers: INNET_DP_DIR, or `make install`)",
				 path, strerror(errno));
			return -ENOENT;
		}
		unsigned char buf[16384];
		size_t n;
		while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
			crypto_hash_sha256_update(&h, buf, n);
		fclose(f);
	}
	unsigned char out[crypto_hash_sha256_BYTES];
	crypto_hash_sha256_final(&h, out);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", out[i]);
	return 0;
}

static double secs_since(uint64_t t0)
{
	return (double)(innet_now_ns() - t0) / 1e9;
}

/* The rest of p4_build, under the key's lock: the cache, or a build. Frees src. */
static int p4_build_locked(char *src, const char *dpdir, const char *cdir, const char *final,
			   const char *marker, bool want_bpf, struct p4_built *out, char *err,
			   size_t errlen)
{
	int rc;
	if (exists(marker)) {
		free(src);
		out->cached = true;
		if (!exists(out->bpf_path)) {
			char bl[3100];
			snprintf(bl, sizeof(bl), "%s/bpf.err", final);
			FILE *f = fopen(bl, "r");
			size_t n = f ? fread(out->bpf_error, 1, sizeof(out->bpf_error) - 1, f) : 0;
			out->bpf_error[n] = '\0';
			if (f)
				fclose(f);
			out->bpf_path[0] = '\0';
		}
		return 0;
	}
	if ((rc = mkdirs(cdir)) != 0) {
		free(src);
		snprintf(err, errlen, "cannot create the P4 cache %s: %s", cdir, strerror(-rc));
		return rc;
	}
	char tmp[3072];
	snprintf(tmp, sizeof(tmp), "%s/.build-%s-%d", cdir, out->key, (int)getpid());
	if (mkdir(tmp, 0755) != 0 && errno != EEXIST) {
		free(src);
		snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
		return -errno;
	}
	uint64_t t0;
	char path_c[3200], path_so[3200], path_bpf[3200], path_log[3200], path_berr[3200];
	snprintf(path_c, sizeof(path_c), "%s/dp.c", tmp);
	snprintf(path_so, sizeof(path_so), "%s/dp.so", tmp);
	snprintf(path_bpf, sizeof(path_bpf), "%s/dp.bpf.o", tmp);
	snprintf(path_log, sizeof(path_log), "%s/build.log", tmp);
	snprintf(path_berr, sizeof(path_berr), "%s/bpf.err", tmp);
	rc = write_file(path_c, src, strlen(src));
	free(src);
	if (rc != 0) {
		snprintf(err, errlen, "cannot write %s: %s", path_c, strerror(-rc));
		goto out_rm;
	}
	/* the user-space object */
	const char *cc = getenv("INNET_CC");
	if (cc == NULL || cc[0] == '\0')
		cc = "cc";
	char inc[256], cmd[512], iinc[2100], isrc[2100], incsys[300];
	snprintf(cmd, sizeof(cmd), "%s -print-file-name=include", cc);
	if (capture(cmd, inc, sizeof(inc)) != 0) {
		snprintf(err, errlen, "cannot run the C compiler '%s' (INNET_CC): a P4 program is compiled "
			 "when it is loaded", cc);
		rc = -ENOENT;
		goto out_rm;
	}
	char incdir[2048];
	inc_dir(dpdir, incdir, sizeof(incdir));
	snprintf(iinc, sizeof(iinc), "-I%s", incdir);
	snprintf(isrc, sizeof(isrc), "-I%s/src", dpdir);
	snprintf(incsys, sizeof(incsys), "%s", inc);
	t0 = innet_now_ns();
	char *const cc_argv[] = {
		(char *)cc, "-std=gnu11", "-O2", "-fPIC", "-shared", "-ffreestanding", "-nostdinc",
		"-nostdlib", "-isystem", incsys, iinc, isrc, "-fno-math-errno", "-Wall",
		"-Wno-unused-label", "-Wno-unused-function", "-Wno-unused-variable",
		"-Wno-unused-but-set-variable", "-Werror=implicit-function-declaration",
		"-Wframe-larger-than=512", "-o", path_so, path_c, NULL,
	};
	rc = run(cc_argv, path_log);
	out->cc_s = secs_since(t0);
	if (rc != 0) {
		char tail[600];
		log_tail(path_log, tail, sizeof(tail));
		snprintf(err, errlen, "compiling the generated data path failed (%s; %s/build.log kept): %s",
			 rc < 0 ? strerror(-rc) : "the compiler said so", cdir, tail);
		/* keep the evidence */
		char keep[3200];
		snprintf(keep, sizeof(keep), "%s/failed-%s", cdir, out->key);
		rename(tmp, keep);
		return -EINVAL;
	}
	if ((rc = check_contract(path_so, err, errlen)) != 0)
		goto out_rm;
	/* the eBPF object (always: one cache entry serves both targets; a
	 * program that cannot be one says why, and runs in user space) */
	(void)want_bpf;
	{
		const char *clang = getenv("INNET_BPF_CLANG");
		if (clang == NULL || clang[0] == '\0')
			clang = "clang";
		char march[128] = "", imarch[200], defsrc[3300], tmpl[2100];
		snprintf(cmd, sizeof(cmd), "%s -print-multiarch", cc);
		if (capture(cmd, march, sizeof(march)) != 0)
			snprintf(march, sizeof(march), "x86_64-linux-gnu");
		snprintf(imarch, sizeof(imarch), "-I/usr/include/%s", march);
		snprintf(defsrc, sizeof(defsrc), "-DINNET_DP_SOURCE=\"%s\"", path_c);
		snprintf(tmpl, sizeof(tmpl), "%s/src/targets/xdp/prog.bpf.c", dpdir);
		t0 = innet_now_ns();
		char *const bpf_argv[] = {
			(char *)clang, "-target", "bpf", "-mcpu=v3", "-O2", "-g", "-ffreestanding",
			"-Wall", "-Wno-unused-parameter", "-Wno-unused-function", "-Wno-unused-label",
			"-Wno-unused-variable", "-Wno-unused-but-set-variable", iinc, isrc, imarch, defsrc,
			"-c", "-o", path_bpf, tmpl, NULL,
		};
		int brc = run(bpf_argv, path_log);
		out->bpf_s = secs_since(t0);
		if (brc != 0) {
			char tail[600];
			log_tail(path_log, tail, sizeof(tail));
			snprintf(out->bpf_error, sizeof(out->bpf_error), "clang -target bpf failed (%s): %s",
				 brc < 0 ? strerror(-brc) : "see build.log", tail);
			write_file(path_berr, out->bpf_error, strlen(out->bpf_error));
			unlink(path_bpf);
		}
	}
	char done[3200];
	snprintf(done, sizeof(done), "%s/done", tmp);
	if ((rc = write_file(done, "", 0)) != 0) {
		snprintf(err, errlen, "cannot write %s: %s", done, strerror(-rc));
		goto out_rm;
	}
	if (rename(tmp, final) != 0) {
		/* another loader finished first: use its result */
		if (!exists(marker)) {
			snprintf(err, errlen, "cannot move %s to %s: %s", tmp, final, strerror(errno));
			rc = -errno;
			goto out_rm;
		}
		rm_tree(tmp);
	}
	if (out->bpf_error[0] != '\0')
		out->bpf_path[0] = '\0';
	return 0;
out_rm:
	rm_tree(tmp);
	return rc ? rc : -EINVAL;
}

int p4_build(const char *json, size_t len, const struct p4_prog *p, struct p4_layout *lay,
	     bool want_bpf, struct p4_built *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	char dpdir[2048], cdir[2048];
	if (p4_dp_dir(dpdir, sizeof(dpdir)) != 0) {
		snprintf(err, errlen, "cannot find the data path's headers (src/p4/p4rt_pipe.h under "
			 "$INNET_DP_DIR, %s or %s): is innet installed?",
			 INNET_SRC_DIR[0] ? INNET_SRC_DIR : "(no source tree)", INNET_SHARE_DIR);
		return -ENOENT;
	}
	/* generate: the source is the key */
	uint64_t tg = innet_now_ns();
	char *src = NULL;
	int rc = p4_gen(p, lay, "p4prog", &src, err, errlen);
	if (rc != 0)
		return rc;
	out->gen_s = secs_since(tg);
	(void)json;
	(void)len;
	rc = build_key(src, strlen(src), dpdir, out->key, err, errlen);
	if (rc != 0) {
		free(src);
		return rc;
	}
	cache_dir(cdir, sizeof(cdir));
	char final[3072];
	snprintf(final, sizeof(final), "%s/%s", cdir, out->key);
	snprintf(out->so_path, sizeof(out->so_path), "%s/dp.so", final);
	snprintf(out->bpf_path, sizeof(out->bpf_path), "%s/dp.bpf.o", final);
	char marker[3100];
	snprintf(marker, sizeof(marker), "%s/done", final);
	/* one build per key at a time: a second loader of the same program (the
	 * switches of a fabric, a parallel test run) waits for the first and
	 * then finds it in the cache */
	int lockfd = -1;
	if (!exists(marker) && mkdirs(cdir) == 0) {
		char lockp[3100];
		snprintf(lockp, sizeof(lockp), "%s/.lock-%s", cdir, out->key);
		lockfd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (lockfd >= 0)
			while (flock(lockfd, LOCK_EX) != 0 && errno == EINTR)
				;
	}
	rc = p4_build_locked(src, dpdir, cdir, final, marker, want_bpf, out, err, errlen);
	if (lockfd >= 0)
		close(lockfd);   /* (the lock file stays: unlinked, a newcomer would lock another) */
	return rc;
}

