// Reading image files with a bounded size, checking output paths, and atomic writes.
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <utility>

#include "candle/image.h"
#include "image_internal.h"

namespace candle::image {
namespace {

namespace fs = std::filesystem;

std::string errno_str(int e) { return std::strerror(e); }

[[noreturn]] void io_fail(const std::string& what, int e) {
  throw Error(ErrorKind::Io, what + ": " + errno_str(e));
}

std::string lower_ext(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// ---- the temporary file removed on SIGINT/SIGTERM/SIGHUP --------------------------------------

// Only async-signal-safe state: the path is written before `g_armed` is set.
char g_tmp_path[PATH_MAX];
volatile std::sig_atomic_t g_armed = 0;
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_old[3];
bool g_installed[3];
std::mutex g_write_mutex;  // one atomic write at a time owns the static path

extern "C" void on_signal_during_write(int sig) {
  if (g_armed) ::unlink(g_tmp_path);
  g_armed = 0;
  for (int i = 0; i < 3; ++i)
    if (kSignals[i] == sig) ::sigaction(sig, &g_old[i], nullptr);
  // delivered with the previous disposition once this handler returns (the signal is blocked now)
  ::raise(sig);
}

class SignalCleanup {
 public:
  SignalCleanup() {
    g_armed = 0;
    for (int i = 0; i < 3; ++i) {
      struct sigaction old {};
      g_installed[i] = false;
      if (::sigaction(kSignals[i], nullptr, &old) != 0 || old.sa_handler == SIG_IGN)
        continue;  // keeps ignoring
      struct sigaction sa {};
      sa.sa_handler = on_signal_during_write;
      sigemptyset(&sa.sa_mask);
      for (int s : kSignals) sigaddset(&sa.sa_mask, s);
      sa.sa_flags = 0;
      g_old[i] = old;
      if (::sigaction(kSignals[i], &sa, nullptr) == 0) g_installed[i] = true;
    }
  }
  // call with the signals blocked
  void arm(const std::string& tmp) {
    std::snprintf(g_tmp_path, sizeof g_tmp_path, "%s", tmp.c_str());
    g_armed = 1;
  }
  void disarm() { g_armed = 0; }
  SignalCleanup(const SignalCleanup&) = delete;
  SignalCleanup& operator=(const SignalCleanup&) = delete;
  ~SignalCleanup() {
    g_armed = 0;
    for (int i = 0; i < 3; ++i)
      if (g_installed[i]) ::sigaction(kSignals[i], &g_old[i], nullptr);
  }
};

std::string random_hex() {
  std::random_device rd;
  const uint64_t v = (uint64_t(rd()) << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

std::vector<uint8_t> read_file(const std::string& path, size_t max_bytes) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) io_fail("cannot read " + path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) io_fail("cannot read " + path, errno);
  if (S_ISDIR(st.st_mode)) io_fail("cannot read " + path, EISDIR);
  if (!S_ISREG(st.st_mode)) throw Error(ErrorKind::Io, "cannot read " + path + ": not a regular file");
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    throw Error(ErrorKind::Io, "cannot read " + path + ": the file is " + std::to_string(size) +
                                   " bytes, over the limit of " + std::to_string(max_bytes));
  }
  std::vector<uint8_t> data(static_cast<size_t>(size));
  size_t got = 0;
  while (got < data.size()) {
    const ssize_t n = ::read(fd.get(), data.data() + got, data.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) io_fail("cannot read " + path, errno);
    if (n == 0) break;  // shrank while read: what is there
    got += static_cast<size_t>(n);
  }
  data.resize(got);
  return data;
}

namespace {

size_t file_limit(const DecodeOptions& opts) {
  if (opts.max_file_bytes) return opts.max_file_bytes;
  size_t n = 0;
  // 16-bit RGBA stored uncompressed is 8 bytes a pixel
  if (!detail::mul_ok(opts.max_pixels, 8, n) || n > SIZE_MAX - (16u << 20)) return SIZE_MAX;
  return n + (16u << 20);
}

std::vector<uint8_t> read_image_file(const std::string& path, const DecodeOptions& opts) {
  try {
    return read_file(path, file_limit(opts));
  } catch (const Error& e) {
    if (opts.max_file_bytes == 0 && !opts.max_pixels_flag.empty() &&
        e.message().find("over the limit") != std::string::npos)
      throw Error(e.kind(), e.message() + " (it follows the pixel limit: raise it with " +
                                std::string(opts.max_pixels_flag) + ")");
    throw;
  }
}

}  // namespace

Info probe_file(const std::string& path, const DecodeOptions& opts) {
  const std::vector<uint8_t> data = read_image_file(path, opts);
  return probe(data, opts, path);
}

Image read(const std::string& path, const DecodeOptions& opts) {
  const std::vector<uint8_t> data = read_image_file(path, opts);
  return decode(data, opts, path);
}

Format check_output_path(const std::string& path) {
  const std::string ext = lower_ext(path);
  Format format;
  if (ext == ".png")
    format = Format::Png;
  else if (ext == ".jpg" || ext == ".jpeg")
    format = Format::Jpeg;
  else if (ext.empty())
    throw Error(ErrorKind::InvalidArgument, "output " + path + " has no extension (use .png, .jpg or .jpeg)");
  else
    throw Error(ErrorKind::InvalidArgument,
                "unsupported output format '" + ext + "' for " + path + " (use .png, .jpg or .jpeg)");
  const std::string what = "cannot write " + path;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) io_fail(what, EISDIR);
    if (!S_ISREG(st.st_mode)) throw Error(ErrorKind::Io, what + ": not a regular file");
  } else if (errno != ENOENT) {
    io_fail(what, errno);
  }
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (::stat(dir.c_str(), &st) != 0) io_fail(what + ": directory " + dir.string(), errno);
  if (!S_ISDIR(st.st_mode)) io_fail(what + ": " + dir.string(), ENOTDIR);
  if (::access(dir.c_str(), W_OK | X_OK) != 0) io_fail(what + ": directory " + dir.string(), errno);
  return format;
}

void write_file_atomic(const std::string& path, std::span<const uint8_t> bytes) {
  const std::string what = "cannot write " + path;
  fs::path target(path);
  fs::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  std::string name = target.filename().string();
  if (name.empty()) throw Error(ErrorKind::InvalidArgument, what + ": no file name");
  struct stat st {};
  bool keep_mode = false;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) io_fail(what, EISDIR);
    if (!S_ISREG(st.st_mode)) throw Error(ErrorKind::Io, what + ": not a regular file");
    keep_mode = true;
  } else if (errno != ENOENT) {
    io_fail(what, errno);
  }

  std::lock_guard<std::mutex> lock(g_write_mutex);
  // .<name>.tmp-<pid>-<random>, the name cut so that the whole stays under NAME_MAX
  const std::string suffix = ".tmp-" + std::to_string(::getpid()) + "-";
  if (name.size() > 200) name.resize(200);
  std::string tmp;
  int raw_fd = -1;
  SignalCleanup cleanup;
  sigset_t block, old_mask;
  sigemptyset(&block);
  for (int s : kSignals) sigaddset(&block, s);
  for (int attempt = 0; attempt < 16 && raw_fd < 0; ++attempt) {
    tmp = (dir / ("." + name + suffix + random_hex())).string();
    if (tmp.size() >= PATH_MAX) io_fail(what, ENAMETOOLONG);
    // no signal between the creation and the cleanup knowing the name
    pthread_sigmask(SIG_BLOCK, &block, &old_mask);
    raw_fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    const int e = errno;
    if (raw_fd >= 0) cleanup.arm(tmp);
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    if (raw_fd < 0 && e != EEXIST) io_fail(what + ": creating " + tmp, e);
  }
  if (raw_fd < 0) io_fail(what + ": creating " + tmp, EEXIST);
  Fd fd(raw_fd);
  auto fail_removing = [&](const std::string& step, int e) {
    cleanup.disarm();
    ::unlink(tmp.c_str());
    io_fail(what + ": " + step, e);
  };
  if (keep_mode && ::fchmod(fd.get(), st.st_mode & 07777) != 0) fail_removing("fchmod", errno);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_removing("write", errno);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) fail_removing("fsync", errno);
  if (::close(fd.release()) != 0) fail_removing("close", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail_removing("rename", errno);
  cleanup.disarm();
  // the rename itself made durable; file systems that cannot sync a directory say EINVAL
  Fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd.get() >= 0 && ::fsync(dfd.get()) != 0 && errno != EINVAL && errno != EROFS)
    io_fail(what + ": fsync of " + dir.string(), errno);
}

void write(const std::string& path, const uint8_t* pixels, size_t width, size_t height, size_t channels,
           const EncodeOptions& opts) {
  const Format format = check_output_path(path);
  const std::vector<uint8_t> bytes = format == Format::Png
                                         ? encode_png(pixels, width, height, channels, opts)
                                         : encode_jpeg(pixels, width, height, channels, opts);
  write_file_atomic(path, bytes);
}

void write(const std::string& path, const Image& img, const EncodeOptions& opts) {
  if (img.pixels.size() != img.width * img.height * img.channels)
    throw Error(ErrorKind::InvalidArgument,
                "cannot write " + path + ": the image's pixel buffer has the wrong size");
  write(path, img.pixels.data(), img.width, img.height, img.channels, opts);
}

}  // namespace candle::image
