// Memory-mapped files and atomic (temporary + rename) file writes.
#include "io/mmap.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "candle/error.h"

namespace candle::io {

namespace {
Error io_error(const std::string& what, const std::string& path, int err) {
  return Error(ErrorKind::Io, what + " '" + path + "': " + std::strerror(err));
}

constexpr size_t kWriteBuffer = size_t(1) << 20;
}  // namespace

std::shared_ptr<MmapedFile> MmapedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw io_error("cannot open", path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw io_error("cannot stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(ErrorKind::Io, "cannot map '" + path + "': not a regular file");
  }
  size_t size = static_cast<size_t>(st.st_size);
  std::byte* data = nullptr;
  if (size > 0) {
    // MAP_PRIVATE + PROT_WRITE: copy-on-write, so writes through a wrapping tensor never
    // reach the file and never fault.
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw io_error("cannot mmap", path, err);
    }
    data = static_cast<std::byte*>(p);
  }
  ::close(fd);
  return std::shared_ptr<MmapedFile>(new MmapedFile(path, data, size));
}

MmapedFile::~MmapedFile() {
  if (data_) ::munmap(data_, size_);
}

void MmapedFile::release(const void* p, size_t n) const {
#ifdef MADV_PAGEOUT
  if (n == 0 || !contains(p, n)) return;
  constexpr size_t kSpan = size_t(2) << 20;
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t off = static_cast<size_t>(static_cast<const std::byte*>(p) - data_);
  std::lock_guard lock(release_mu_);
  // merge [off, off + n) into the released ranges
  size_t b = off, e = off + n;
  auto it = released_.upper_bound(b);
  if (it != released_.begin()) {
    auto prev = std::prev(it);
    if (prev->second >= b) {
      b = prev->first;
      e = std::max(e, prev->second);
      released_.erase(prev);
    }
  }
  while (it != released_.end() && it->first <= e) {
    e = std::max(e, it->second);
    it = released_.erase(it);
  }
  released_[b] = e;
  if (span_out_.empty()) span_out_.assign((size_ + kSpan - 1) / kSpan, false);
  // the spans this range touches that are now released throughout
  for (size_t s = off / kSpan; s <= (off + n - 1) / kSpan; ++s) {
    if (span_out_[s]) continue;
    const size_t sb = s * kSpan, se = std::min(sb + kSpan, size_);
    auto c = released_.upper_bound(sb);
    if (c == released_.begin() || std::prev(c)->second < se) continue;
    ::madvise(data_ + sb, (se - sb + page - 1) / page * page, MADV_PAGEOUT);
    span_out_[s] = true;
  }
#else
  (void)p;
  (void)n;
#endif
}

bool MmapedFile::contains(const void* p, size_t n) const {
  auto b = reinterpret_cast<uintptr_t>(data_);
  auto q = reinterpret_cast<uintptr_t>(p);
  return q >= b && q - b <= size_ && n <= size_ - (q - b);
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  for (int attempt = 0; attempt < 100; ++attempt) {
    uint64_t r = (uint64_t(rd()) << 32) ^ rd() ^ (uint64_t(::getpid()) << 16) ^ counter.fetch_add(1);
    char suffix[16];
    std::snprintf(suffix, sizeof suffix, "%06llx", static_cast<unsigned long long>(r & 0xffffff));
    tmp_ = path_ + ".tmp-" + suffix;
    // 0666 & ~umask, as a plain create would give (mkstemp would force 0600)
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) break;
    if (errno != EEXIST) throw io_error("cannot create", tmp_, errno);
  }
  if (fd_ < 0) throw Error(ErrorKind::Io, "cannot create a temporary file next to '" + path_ + "'");
  buf_ = std::make_unique<std::byte[]>(kWriteBuffer);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void AtomicFile::flush_buffer() {
  size_t done = 0;
  while (done < buf_len_) {
    ssize_t w = ::write(fd_, buf_.get() + done, buf_len_ - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw io_error("cannot write", tmp_, errno);
    }
    done += static_cast<size_t>(w);
  }
  buf_len_ = 0;
}

void AtomicFile::write(const void* data, size_t n) {
  auto p = static_cast<const std::byte*>(data);
  while (n > 0) {
    size_t k = std::min(n, kWriteBuffer - buf_len_);
    std::memcpy(buf_.get() + buf_len_, p, k);
    buf_len_ += k;
    p += k;
    n -= k;
    if (buf_len_ == kWriteBuffer) flush_buffer();
  }
}

void AtomicFile::commit() {
  flush_buffer();
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw io_error("cannot write", tmp_, errno);
  if (::rename(tmp_.c_str(), path_.c_str()) != 0)
    throw io_error("cannot rename temporary file onto", path_, errno);
  committed_ = true;
}

}  // namespace candle::io
