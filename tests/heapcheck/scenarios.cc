// Programs that leak in known ways, and programs that keep memory in ways that are not
// leaks. One scenario per process: `hc_scenarios <name>`. The driver (run_heapcheck.py)
// runs each under every HEAPCHECK level and compares the checker's verdict with what the
// level's definition says (docs/heap-checker.md); the expected numbers live there.
//
// The program knows nothing about the checker: it is run with LD_PRELOAD (or linked with
// the library, the hc_scenarios_linked build), unmodified.
//
// Leaks are made inside Deep(), far below the frames that are live at exit, and every
// thread that leaks scrubs nothing by hand: stale copies of the lost pointers remain in
// dead stack memory, which is exactly what the checker has to see past.
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <alloca.h>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <locale>
#include <mutex>
#include <new>
#include <pwd.h>
#include <stdexcept>
#include <string>
#include <thread>

// Globals that hold memory have external linkage, so the compiler must keep every store to
// them (a static that is only written may be optimized away, and then its object really is
// unreachable).
struct Node {
  Node* next;
  char pad[56];
};
struct B {
  virtual ~B() = default;
  long b = 2;
};
struct WithDtor {
  ~WithDtor() { x = 0; }
  long x = 5, y = 6;
};
void* g_plain;
void* g_array[4];
Node* g_list;
B* g_base2;           // points 16 bytes into a D
WithDtor* g_cookie;   // new[] of a class with a destructor: 8 bytes past the block start
char* g_near;         // 1000 bytes into a 2000-byte block: within the default 1024
char* g_str;
void** g_region;      // an anonymous mapping of the program's own (like another allocator's arena)

char* g_far;  // points 2048 bytes into a 4096-byte block: beyond the default 1024
thread_local void* t_object;
struct Forgetful {
  char* p = nullptr;
  // "Forgets" without freeing: a leak only after destructors. (A volatile store: the
  // compiler may drop plain stores to an object whose lifetime ends.)
  ~Forgetful() { *const_cast<char* volatile*>(&p) = nullptr; }
};
Forgetful g_forgetful;
struct __attribute__((packed)) Packed {
  char c;
  void* p;  // at offset 1: not where the scan looks by default
};
Packed g_packed;
void* g_thread_stack;  // a thread stack the program allocated with malloc
char* g_ends[73];      // blocks that hold a pointer one past their own end

namespace {

void* volatile g_sink;  // where fresh pointers go so the compiler keeps the allocations

void* Keep(void* p) {
  g_sink = p;
  return p;
}

// Runs f 64 KiB further down the stack than the caller: the frames that are live when
// the program exits never reach down there, so stale copies of pointers f dropped are
// below every stack pointer and not roots.
__attribute__((noinline)) void Deep(void (*f)()) {
  volatile char* pad = static_cast<volatile char*>(alloca(64 * 1024));
  pad[0] = 1;
  f();
  pad[1] = 2;
}

// Leaves 32 KiB of stale copies of a leaked block's address right below main's frame,
// where the exit handlers and the checker later run. Dead memory, but the checker's own
// sigaction calls at exit once copied 120 bytes of it (glibc fills only the kernel's 8
// bytes of a saved sa_mask) into the library's data, a root: the leak went unreported
// (a git command's leaked 8 KiB buffer, on the CI machine).
__attribute__((noinline)) void LeaveStaleCopies() {
  void* leaked = Keep(malloc(1234));
  volatile uintptr_t copies[4096];
  for (volatile uintptr_t& c : copies) c = reinterpret_cast<uintptr_t>(leaked);
  g_sink = nullptr;
}

// Frees 100 000 blocks of 48 bytes (the front end overflows into the transfer cache in
// chains), allocates as many again (the chains come back out; the transfer cache's slots
// keep their stale heads and tails) and leaks them all. The allocator's metadata is not a
// reference: every one of them must be reported.
constexpr int kRecycled = 100000;
__attribute__((noinline)) void LeakThroughTheTransferCache() {
  void** held = static_cast<void**>(malloc(kRecycled * sizeof(void*)));
  for (int i = 0; i < kRecycled; ++i) held[i] = malloc(48);
  for (int i = 0; i < kRecycled; ++i) free(held[i]);
  for (int i = 0; i < kRecycled; ++i) held[i] = malloc(48);
  free(Keep(held));  // the only pointers to the new blocks, in a freed block
  g_sink = nullptr;
}

// Blocks the calling thread forever (it stays alive at exit).
[[noreturn]] void BlockForever() {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
  pthread_mutex_lock(&mu);
  for (;;) pthread_cond_wait(&cv, &mu);
}

std::atomic<int> g_ready{0};

void Start(int n, void* (*fn)(void*)) {
  for (int i = 0; i < n; ++i) {
    pthread_t t;
    pthread_create(&t, nullptr, fn, nullptr);
    pthread_detach(t);
  }
}

void WaitReady(int n) {
  while (g_ready.load() < n) usleep(1000);
}

std::string PluginPath() {
  // The plugin sits next to this executable.
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  exe[n > 0 ? n : 0] = '\0';
  std::string dir(exe);
  dir.resize(dir.rfind('/') + 1);
  return dir + "libhc_plugin.so";
}

void* OpenPlugin() {
  void* h = dlopen(PluginPath().c_str(), RTLD_NOW);
  if (h == nullptr) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    exit(99);
  }
  return h;
}

// ---- leaks ----

void LostThree() {
  for (int i = 0; i < 3; ++i) memset(Keep(malloc(1000)), 1, 1000);
  g_sink = nullptr;
}

void LostCycles() {
  Node* a = new Node{};
  Node* b = new Node{};
  Node* c = new Node{};
  a->next = b;
  b->next = c;
  c->next = a;
  Node* self = new Node{};
  self->next = self;
  Keep(a);
  Keep(self);
  g_sink = nullptr;
}

void LeakTwo500() {
  for (int i = 0; i < 2; ++i) memset(Keep(malloc(500)), 2, 500);
  g_sink = nullptr;
}

void* LeakInExitingThread(void*) {
  Deep(&LeakTwo500);
  return nullptr;
}

void LeakTwo300() {
  for (int i = 0; i < 2; ++i) memset(Keep(malloc(300)), 3, 300);
  g_sink = nullptr;
}

void* LeakThenBlock(void*) {
  Deep(&LeakTwo300);
  g_ready.fetch_add(1);
  BlockForever();
}

void MakeFar() {
  g_far = static_cast<char*>(Keep(malloc(4096))) + 2048;
  g_sink = nullptr;
}

// Each kept block stores its own end (a vector whose capacity fills its block, an arena
// block's limit) and is followed by a lost block of the same size, which a fresh span or
// page run places right after it: the end pointers must not keep the lost blocks alive.
void LostBehindEndPointers() {
  for (int i = 0; i < 73; ++i) {
    // 64 small blocks, a page run, and 8 aligned blocks (memalign takes its own path).
    const size_t size = i < 64 ? 64 : i == 64 ? size_t{1} << 20 : 64;
    char* a = static_cast<char*>(i < 65 ? malloc(size) : memalign(64, size));
    memset(a, 0, 64);
    reinterpret_cast<char**>(a)[1] = a + size;
    g_ends[i] = a;
    Keep(i < 65 ? malloc(size) : memalign(64, size));
  }
  g_sink = nullptr;
}

void LostBehindInterior() {
  // a is lost; b is referenced only by an interior pointer stored in a.
  char** a = static_cast<char**>(Keep(malloc(64)));
  char* b = static_cast<char*>(Keep(malloc(200)));
  memset(a, 0, 64);
  a[0] = b + 16;
  g_sink = nullptr;
}

void LostFromEveryEntryPoint() {
  Keep(calloc(10, 100));
  Keep(realloc(malloc(10), 500));
  void* p = nullptr;
  if (posix_memalign(&p, 64, 256) == 0) Keep(p);
  Keep(aligned_alloc(4096, 4096));
  Keep(memalign(128, 384));  // a class size: hooks see the rounded size (see docs)
  Keep(new char[700]);
  Keep(malloc(2 << 20));
  Keep(new (std::align_val_t(256)) char[512]);
  g_sink = nullptr;
}

// ---- memory that is not leaked (at every level but draconian) ----

struct A {
  virtual ~A() = default;
  long a = 1;
};
struct D : A, B {};

int* StaticLocal() {
  static int* p = new int[10];
  return p;
}

void HoldInGlobals() {
  g_plain = malloc(100);
  for (void*& p : g_array) p = malloc(50);
  for (int i = 0; i < 5; ++i) {
    Node* n = static_cast<Node*>(malloc(32));
    n->next = g_list;
    g_list = n;
  }
  g_base2 = new D;
  g_cookie = new WithDtor[3];
  g_near = static_cast<char*>(malloc(2000)) + 1000;
  g_str = strdup("hello heap checker");
  StaticLocal();
  g_region = static_cast<void**>(mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  g_region[1000] = malloc(77);
}

void* HoldOnStack(void*) {
  void* volatile mine = malloc(400);
  (void)mine;
  g_ready.fetch_add(1);
  BlockForever();
}

// Keeps the only pointer to its block in r15 (and xmm15), never in memory: the copy the
// thread had on its stack is hidden before the block is put into the registers.
constexpr uintptr_t kMask = 0x5a5a5a5a5a5a5a5aull;

__attribute__((noinline)) uintptr_t AllocHidden(size_t n) { return reinterpret_cast<uintptr_t>(malloc(n)) ^ kMask; }

void* HoldInRegister(void*) {
  const uintptr_t hidden = AllocHidden(999);
  const uintptr_t hidden2 = AllocHidden(888);
  g_ready.fetch_add(1);
  asm volatile(
      "mov %0, %%r15\n\t"
      "xor %2, %%r15\n\t"
      "mov %1, %%rax\n\t"
      "xor %2, %%rax\n\t"
      "movq %%rax, %%xmm15\n\t"
      "xor %%eax, %%eax\n\t"
      "1: pause\n\t"
      "jmp 1b\n\t" ::"r"(hidden),
      "r"(hidden2), "r"(kMask)
      : "r15", "rax", "xmm15", "memory");
  __builtin_unreachable();
}

void* HoldInTls(void*) {
  t_object = malloc(456);
  void* plugin = OpenPlugin();
  reinterpret_cast<void (*)(void*)>(dlsym(plugin, "hc_plugin_set_tls"))(malloc(321));
  g_ready.fetch_add(1);
  BlockForever();
}

// An alternate signal stack from malloc, whose only pointer the kernel keeps.
void SetAltStack() {
  stack_t ss{};
  ss.ss_size = 64 * 1024;
  ss.ss_sp = malloc(ss.ss_size);
  sigaltstack(&ss, nullptr);
}

void* AltStackThenBlock(void*) {
  Deep(&SetAltStack);
  g_ready.fetch_add(1);
  BlockForever();
}

void AtExitNoop() {}

void UseLibcInternals() {
  // A library opened and its handle dropped: only the dynamic loader knows it.
  OpenPlugin();
  // A failed dlopen leaves an error message allocated in libc's thread state.
  if (dlopen("/nonexistent/libnothing.so", RTLD_NOW) == nullptr) dlerror();
  dlopen("/nonexistent/libnothing2.so", RTLD_NOW);
  // More than 32 thread-specific keys: glibc allocates a second-level array.
  for (int i = 0; i < 40; ++i) {
    pthread_key_t k;
    if (pthread_key_create(&k, nullptr) == 0) pthread_setspecific(k, reinterpret_cast<void*>(uintptr_t{1}));
  }
  setenv("HC_VAR_ONE", "1", 1);
  setenv("HC_VAR_TWO", "2", 1);
  putenv(strdup("HC_VAR_THREE=3"));
  for (int i = 0; i < 40; ++i) atexit(&AtExitNoop);
  FILE* f = fopen("/proc/self/maps", "r");  // left open: libc's list of streams holds it
  char line[256];
  if (f != nullptr && fgets(line, sizeof(line), f) == nullptr) fclose(f);
  printf("stdout is buffered by libc\n");
  time_t now = time(nullptr);
  localtime(&now);
  strerror(EINVAL);
  getpwuid(0);
  std::cout << "iostream too" << std::endl;
  std::locale loc("");
  (void)loc;
  try {
    throw std::runtime_error("caught");
  } catch (const std::exception&) {
  }
  static std::once_flag once;
  std::call_once(once, [] {});
  std::thread([] { std::string s(100, 'x'); }).join();
  Deep(&SetAltStack);
  Start(1, &AltStackThenBlock);
  WaitReady(1);
}

// ---- more ----

void MakeUnaligned() {
  g_packed.p = Keep(malloc(432));
  g_sink = nullptr;
}

void FillForgetful() { g_forgetful.p = static_cast<char*>(Keep(malloc(333))); g_sink = nullptr; }

void* BlockAllSignals(void*) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  void* volatile mine = malloc(555);
  (void)mine;
  g_ready.fetch_add(1);
  sigset_t none;
  sigemptyset(&none);
  sigaddset(&none, SIGUSR2);
  for (;;) sigwaitinfo(&none, nullptr);  // never sent
}

void* HoldOnHeapStack(void*) {
  void* volatile mine = malloc(321);
  (void)mine;
  g_ready.fetch_add(1);
  BlockForever();
}

void StartOnHeapStack() {
  const size_t size = 256 * 1024;
  g_thread_stack = aligned_alloc(4096, size);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstack(&attr, g_thread_stack, size);
  pthread_t t;
  pthread_create(&t, &attr, &HoldOnHeapStack, nullptr);
  pthread_detach(t);
  pthread_attr_destroy(&attr);
}

void* HoldHundred(void*) {
  void* volatile mine = malloc(100);
  (void)mine;
  g_ready.fetch_add(1);
  BlockForever();
}

void LeakInConstructor() {
  for (int i = 0; i < 2; ++i) memset(Keep(malloc(222)), 4, 222);
  g_sink = nullptr;
}

bool g_ctor_leak = false;

struct ConstructorLeak {
  ConstructorLeak() {
    const char* s = getenv("HC_CTOR_LEAK");
    if (s != nullptr && s[0] == '1') {
      g_ctor_leak = true;
      Deep(&LeakInConstructor);
    }
  }
};
ConstructorLeak g_constructor_leak;

int Run(const std::string& s) {
  if (s == "lost") {
    Deep(&LostThree);
  } else if (s == "transfer_slots") {
    Deep(&LeakThroughTheTransferCache);
  } else if (s == "stale_stack") {
    LeaveStaleCopies();
  } else if (s == "cycle") {
    Deep(&LostCycles);
  } else if (s == "thread_exited") {
    pthread_t t[4];
    for (pthread_t& x : t) pthread_create(&x, nullptr, &LeakInExitingThread, nullptr);
    for (pthread_t& x : t) pthread_join(x, nullptr);
  } else if (s == "thread_alive") {
    Start(1, &LeakThenBlock);
    WaitReady(1);
  } else if (s == "interior_far") {
    Deep(&MakeFar);
  } else if (s == "behind_end_pointers") {
    Deep(&LostBehindEndPointers);
  } else if (s == "behind_interior") {
    Deep(&LostBehindInterior);
  } else if (s == "entry_points") {
    Deep(&LostFromEveryEntryPoint);
  } else if (s == "globals") {
    Deep(&HoldInGlobals);
  } else if (s == "strict_dtor") {
    Deep(&FillForgetful);
  } else if (s == "ctor_leak") {
    if (!g_ctor_leak) return 98;  // the driver sets HC_CTOR_LEAK=1
  } else if (s == "thread_stacks") {
    Start(3, &HoldOnStack);
    WaitReady(3);
  } else if (s == "registers") {
    Start(1, &HoldInRegister);
    WaitReady(1);
    usleep(20000);  // into the spin loop
  } else if (s == "tls") {
    t_object = malloc(123);
    void* plugin = OpenPlugin();
    reinterpret_cast<void (*)(void*)>(dlsym(plugin, "hc_plugin_set_tls"))(malloc(789));
    Start(1, &HoldInTls);
    WaitReady(1);
  } else if (s == "libc_internals") {
    UseLibcInternals();
  } else if (s == "clean") {
    void* p = malloc(100);
    char* q = new char[5000];
    free(Keep(p));
    delete[] static_cast<char*>(Keep(q));
    std::string str(1000, 'y');
  } else if (s == "exit_code") {
    for (int i = 0; i < 1000; ++i) printf("line %d\n", i);
    return 3;
  } else if (s == "leak_exit_flushes") {
    for (int i = 0; i < 1000; ++i) printf("line %d\n", i);
    Deep(&LostThree);
  } else if (s == "fork_child") {
    pid_t pid = fork();
    if (pid == 0) {
      Deep(&LostThree);
      exit(0);  // the child leaks too, but only the parent checks
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 97;
  } else if (s == "stuck_thread") {
    Start(1, &BlockAllSignals);
    WaitReady(1);
    usleep(20000);  // into sigwaitinfo
  } else if (s == "heap_stack") {
    StartOnHeapStack();
    WaitReady(1);
  } else if (s == "many_threads") {
    Start(40, &HoldHundred);
    WaitReady(40);
  } else if (s == "plugin_leak") {
    void* plugin = OpenPlugin();
    reinterpret_cast<void (*)()>(dlsym(plugin, "hc_plugin_leak"))();
  } else if (s == "unaligned") {
    Deep(&MakeUnaligned);
  } else {
    fprintf(stderr, "unknown scenario %s\n", s.c_str());
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <scenario>\n", argv[0]);
    return 2;
  }
  return Run(argv[1]);
}
