/*
 * agg_mpi_allreduce.c — a plain MPI program (it knows nothing of innet) used
 * to show and test the PMPI library build/libinnet-mpi.so, and as the MPI
 * side of bench/allreduce.sh.
 *
 *   mpicc -O2 -o agg_mpi_allreduce examples/agg_mpi_allreduce.c
 *   mpirun -np 4 ./agg_mpi_allreduce                  check mode
 *   mpirun -np 4 ./agg_mpi_allreduce --bench N ITERS  time ITERS float all-reduces of N
 *
 * Check mode: MPI_Allreduce(MPI_SUM) on MPI_COMM_WORLD of MPI_INT and
 * MPI_FLOAT arrays of several lengths (and in place), checked against the
 * same sum computed with MPI_Reduce + MPI_Bcast: ints exactly, floats within
 * 4e-6 of the largest |input| (float32's own rounding of a 4-way sum is
 * ~1e-6 of it). Then calls the interposer must pass through: MPI_DOUBLE,
 * MPI_MAX, a split communicator — checked the same way. Rank 0 prints
 * "agg_mpi_allreduce: ok calls=N" or the first mismatch; exit 0 / 1.
 *
 * Bench mode: rank 0 prints
 *   RESULT impl=mpi count=N iters=I median_s=S min_s=S elem_per_s=R gbit_s=G
 * (per-iteration times between barriers; elements/s of one rank's array).
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static int gen_i(int r, int call, int i)
{
	unsigned x = (unsigned)i * 2654435761u ^ (unsigned)r * 0x9E3779B9u ^ (unsigned)call << 22;
	x ^= x >> 15;
	x *= 0x2c1b3c6du;
	x ^= x >> 12;
	return (int)x;
}

static float gen_f(int r, int call, int i)
{
	double mag = pow(10.0, (double)((i / 300 + call) % 7) - 3.0);
	return (float)((double)(gen_i(r, call, i) % 1000001) * 1e-6 * mag);
}

/* Reference sum over ranks with MPI_Reduce + MPI_Bcast. */
static void reference(const void *x, void *ref, int n, MPI_Datatype t)
{
	MPI_Reduce(x, ref, n, t, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Bcast(ref, n, t, 0, MPI_COMM_WORLD);
}

static int check_int(int call, int n, int in_place)
{
	int *x = malloc(sizeof(int) * (size_t)n + 4), *y = malloc(sizeof(int) * (size_t)n + 4),
	    *ref = malloc(sizeof(int) * (size_t)n + 4);
	for (int i = 0; i < n; i++)
		x[i] = gen_i(rank, call, i) % 100000000; /* no overflow in the reference */
	reference(x, ref, n, MPI_INT);
	if (in_place) {
		memcpy(y, x, sizeof(int) * (size_t)n);
		MPI_Allreduce(MPI_IN_PLACE, y, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	} else {
		MPI_Allreduce(x, y, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	}
	int bad = -1;
	for (int i = 0; i < n && bad < 0; i++)
		if (y[i] != ref[i])
			bad = i;
	if (bad >= 0)
		fprintf(stderr, "rank %d: int call %d n %d: [%d] = %d, want %d\n", rank, call, n, bad, y[bad],
			ref[bad]);
	free(x);
	free(y);
	free(ref);
	return bad < 0;
}

static int check_float(int call, int n, int in_place)
{
	float *x = malloc(sizeof(float) * (size_t)n + 4), *y = malloc(sizeof(float) * (size_t)n + 4),
	      *ref = malloc(sizeof(float) * (size_t)n + 4);
	float m = 0, gm;
	for (int i = 0; i < n; i++) {
		x[i] = gen_f(rank, call, i);
		m = fmaxf(m, fabsf(x[i]));
	}
	MPI_Reduce(&m, &gm, 1, MPI_FLOAT, MPI_MAX, 0, MPI_COMM_WORLD); /* not an all-reduce */
	MPI_Bcast(&gm, 1, MPI_FLOAT, 0, MPI_COMM_WORLD);
	reference(x, ref, n, MPI_FLOAT);
	if (in_place) {
		memcpy(y, x, sizeof(float) * (size_t)n);
		MPI_Allreduce(MPI_IN_PLACE, y, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	} else {
		MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	}
	int bad = -1;
	for (int i = 0; i < n && bad < 0; i++)
		if (!(fabsf(y[i] - ref[i]) <= 4e-6f * gm))
			bad = i;
	if (bad >= 0)
		fprintf(stderr, "rank %d: float call %d n %d: [%d] = %.9g, want %.9g\n", rank, call, n, bad,
			y[bad], ref[bad]);
	free(x);
	free(y);
	free(ref);
	return bad < 0;
}

/* Calls that are not (sum, int/float, world): must still be right. */
static int check_others(void)
{
	int ok = 1;
	double d = rank + 0.5, ds;
	MPI_Allreduce(&d, &ds, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	ok &= ds == size * (size - 1) / 2.0 + 0.5 * size;
	int v = rank * 7, vmax;
	MPI_Allreduce(&v, &vmax, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	ok &= vmax == (size - 1) * 7;
	MPI_Comm half;
	MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
	int one = 1, cnt;
	MPI_Allreduce(&one, &cnt, 1, MPI_INT, MPI_SUM, half);
	ok &= cnt == (size + 1 - rank % 2) / 2;
	MPI_Comm_free(&half);
	if (!ok)
		fprintf(stderr, "rank %d: a passed-through all-reduce is wrong\n", rank);
	return ok;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int bench(int n, int iters)
{
	float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
	double *t = calloc((size_t)iters, sizeof(double));
	for (int i = 0; i < n; i++)
		x[i] = gen_f(rank, 0, i);
	for (int it = 0; it < iters; it++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		double dt = MPI_Wtime() - t0, dmax;
		MPI_Reduce(&dt, &dmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		t[it] = dmax;
	}
	if (rank == 0) {
		qsort(t, (size_t)iters, sizeof(double), cmp_double);
		double med = iters % 2 ? t[iters / 2] : (t[iters / 2 - 1] + t[iters / 2]) / 2;
		printf("RESULT impl=mpi count=%d iters=%d median_s=%.6f min_s=%.6f elem_per_s=%.0f gbit_s=%.4f\n", n,
		       iters, med, t[0], n / med, n * 32.0 / med / 1e9);
		fflush(stdout);
	}
	free(x);
	free(y);
	free(t);
	return 1;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int ok = 1, calls = 0;
	if (argc == 4 && strcmp(argv[1], "--bench") == 0) {
		bench(atoi(argv[2]), atoi(argv[3]));
		MPI_Finalize();
		return 0;
	}
	static const int lens[] = { 1, 255, 256, 257, 4096, 100000 };
	for (int c = 0; c < (int)(sizeof(lens) / sizeof(lens[0])); c++) {
		ok &= check_int(c, lens[c], c % 2);
		ok &= check_float(c, lens[c], c % 2 == 0);
		calls += 2;
	}
	ok &= check_others();
	int all_ok;
	MPI_Reduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("agg_mpi_allreduce: %s calls=%d ranks=%d\n", all_ok ? "ok" : "FAIL", calls, size);
	MPI_Bcast(&all_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
	MPI_Finalize();
	return all_ok ? 0 : 1;
}
