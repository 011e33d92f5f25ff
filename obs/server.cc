// obs/server.cc — see server.h.
#include "obs/server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <arpa/inet.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "obs/dashboard.h"
#include "obs/export.h"

namespace mroce::obs {

struct StatServer::Http {
    httplib::Server server;
    std::thread thread;
};

namespace {

constexpr uint64_t kNoEvents = ~uint64_t{0};

bool make_dir(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    struct stat st {};
    return ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

sockaddr_un unix_address(const std::string& path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    return a;
}

// connect_unix: a connected socket to path, or -1 (errno set).
int connect_unix(const std::string& path) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    const sockaddr_un a = unix_address(path);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) {
        const int e = errno;
        ::close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

// write_all with a deadline per wait; false on error or timeout.
bool write_all(int fd, const std::string& s, int timeout_ms) {
    size_t off = 0;
    while (off < s.size()) {
        pollfd p{fd, POLLOUT, 0};
        if (::poll(&p, 1, timeout_ms) <= 0) return false;
        const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        off += static_cast<size_t>(n);
    }
    return true;
}

std::string program_name() {
    std::ifstream f("/proc/self/cmdline", std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::string out;
    for (size_t i = 0, words = 0; i < all.size() && words < 3; ++i) {
        if (all[i] == '\0') {
            ++words;
            if (words < 3 && i + 1 < all.size()) out += ' ';
        } else {
            out += all[i];
        }
    }
    return out;
}

}  // namespace

std::string stat_dir() {
    if (const char* d = std::getenv("MROCE_STAT_DIR"); d && *d) return d;
    if (const char* d = std::getenv("XDG_RUNTIME_DIR"); d && *d) return std::string(d) + "/mroce";
    if (::geteuid() == 0) return "/run/mroce";
    return "/tmp/mroce-" + std::to_string(::geteuid());
}

std::optional<ListenAddress> parse_listen_address(const std::string& s) {
    const size_t colon = s.rfind(':');
    if (colon == std::string::npos || colon + 1 >= s.size()) return std::nullopt;
    std::string host = s.substr(0, colon);
    const std::string port_s = s.substr(colon + 1);
    char* end = nullptr;
    const unsigned long port = std::strtoul(port_s.c_str(), &end, 10);
    if (*end != '\0' || port > 65535) return std::nullopt;
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    in6_addr v6{};
    if (::inet_pton(AF_INET, host.c_str(), &v6) != 1 && ::inet_pton(AF_INET6, host.c_str(), &v6) != 1)
        return std::nullopt;
    return ListenAddress{host, static_cast<uint16_t>(port)};
}

std::unique_ptr<StatServer> StatServer::start(Source source, bool stat_socket,
                                              const std::optional<ListenAddress>& metrics,
                                              std::string* error) {
    std::unique_ptr<StatServer> s(new StatServer());
    s->source_ = std::move(source);
    if (stat_socket) {
        const std::string dir = stat_dir();
        if (!make_dir(dir)) {
            if (error) *error = "stat socket: cannot create " + dir;
            return nullptr;
        }
        const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            if (error) *error = std::string("stat socket: ") + std::strerror(errno);
            return nullptr;
        }
        std::string path;
        for (int n = 0; n < 1000; ++n) {
            path = dir + "/" + std::to_string(::getpid()) + "-" + std::to_string(n) + ".sock";
            const sockaddr_un a = unix_address(path);
            if (path.size() >= sizeof(a.sun_path)) break;
            if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0) break;
            if (errno != EADDRINUSE) {
                path.clear();
                break;
            }
            // A file of a process that ended with this pid: nobody answers; take it over.
            const int probe = connect_unix(path);
            if (probe >= 0) {
                ::close(probe);
            } else if (errno == ECONNREFUSED) {
                ::unlink(path.c_str());
                --n;
            }
            path.clear();
        }
        if (path.empty() || ::listen(fd, 16) != 0) {
            if (error) *error = "stat socket: cannot bind in " + dir;
            ::close(fd);
            return nullptr;
        }
        ::chmod(path.c_str(), 0600);
        s->listen_fd_ = fd;
        s->path_ = path;
        s->stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        s->unix_thread_ = std::thread([p = s.get()] { p->serve_unix(); });
    }
    if (metrics) {
        auto h = std::make_unique<Http>();
        // Few workers: requests are rare (a scrape, a dashboard's poll a second), and each
        // holds the engine lock only to copy. More than one, and a short read timeout,
        // because a browser opens connections ahead of need and keeps them idle: each
        // holds a worker until it sends a request or times out, which with one worker
        // stalled the dashboard's polls (and a scrape) for the default 5 s.
        h->server.new_task_queue = [] { return new httplib::ThreadPool(4); };
        h->server.set_read_timeout(1, 0);
        h->server.set_keep_alive_timeout(1);
        StatServer* self = s.get();
        h->server.Get("/metrics", [self](const httplib::Request&, httplib::Response& res) {
            res.set_content(to_prometheus(self->source_(kNoEvents)), kPrometheusContentType);
        });
        // The live dashboard (obs/dashboard.h): the page, its chart library, its data.
        h->server.Get("/", [](const httplib::Request&, httplib::Response& res) {
            res.set_content(dashboard_html(), "text/html; charset=utf-8");
        });
        h->server.Get("/favicon.ico", [](const httplib::Request&, httplib::Response& res) {
            res.status = 204;  // none: a browser asks, and a 404 would be an error in its log
        });
        h->server.Get("/chart.js", [](const httplib::Request&, httplib::Response& res) {
            if (auto js = chart_js()) {
                res.set_header("Cache-Control", "max-age=3600");
                res.set_content(std::move(*js), "text/javascript");
            } else {
                res.status = 404;
                res.set_content("// " + chart_js_path() + " is missing (Debian: libjs-chart.js)\n", "text/javascript");
            }
        });
        h->server.Get("/snapshot.json", [self](const httplib::Request& req, httplib::Response& res) {
            // ?after=SEQ: only the events after SEQ (the page asks for what is new).
            uint64_t after = 0;
            if (req.has_param("after")) {
                const std::string v = req.get_param_value("after");
                char* end = nullptr;
                after = std::strtoull(v.c_str(), &end, 10);
                if (v.empty() || *end != '\0') {
                    res.status = 400;
                    res.set_content("after: not a number\n", "text/plain");
                    return;
                }
            }
            res.set_header("Cache-Control", "no-store");
            res.set_content(to_json(self->source_(after)).dump(), "application/json");
        });
        const std::string& host = metrics->host;
        int port = metrics->port;
        if (port == 0) {
            port = h->server.bind_to_any_port(host);
        } else if (!h->server.bind_to_port(host, port)) {
            port = -1;
        }
        if (port <= 0) {
            if (error) *error = "metrics: cannot listen on " + host + ":" + std::to_string(metrics->port);
            return nullptr;  // the destructor stops the Unix thread
        }
        s->http_port_ = static_cast<uint16_t>(port);
        h->thread = std::thread([srv = &h->server] { srv->listen_after_bind(); });
        s->http_ = std::move(h);
    }
    return s;
}

StatServer::~StatServer() {
    if (http_) {
        http_->server.stop();
        if (http_->thread.joinable()) http_->thread.join();
    }
    if (unix_thread_.joinable()) {
        const uint64_t one = 1;
        (void)!::write(stop_fd_, &one, sizeof(one));
        unix_thread_.join();
    }
    if (listen_fd_ >= 0) {
        ::close(listen_fd_);
        ::unlink(path_.c_str());
    }
    if (stop_fd_ >= 0) ::close(stop_fd_);
}

std::string StatServer::answer(const std::string& request) {
    const std::string verb = request.substr(0, request.find(' '));
    if (verb == "prometheus") return to_prometheus(source_(kNoEvents));
    if (verb == "json") {
        uint64_t after = 0;
        if (request.size() > 5) after = std::strtoull(request.c_str() + 5, nullptr, 10);
        return to_json(source_(after)).dump() + "\n";
    }
    if (verb == "info") {
        const Snapshot snap = source_(kNoEvents);
        nlohmann::json j;
        j["pid"] = ::getpid();
        j["program"] = program_name();
        j["endpoint"] = snap.endpoint;
        j["connections"] = snap.connections.size();
        j["socket"] = path_;
        return j.dump() + "\n";
    }
    return "error: unknown request (info, json [SEQ], prometheus)\n";
}

void StatServer::serve_unix() {
    for (;;) {
        pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
        if (::poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            return;
        }
        if (fds[1].revents) return;
        const int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0) continue;
        // One request line, read with a deadline: a client that never writes costs this
        // thread at most a second, never the engine.
        std::string line;
        char buf[256];
        while (line.find('\n') == std::string::npos && line.size() < 1024) {
            pollfd p{c, POLLIN, 0};
            if (::poll(&p, 1, 1000) <= 0) break;
            const ssize_t n = ::recv(c, buf, sizeof(buf), 0);
            if (n <= 0) break;
            line.append(buf, static_cast<size_t>(n));
        }
        const size_t nl = line.find('\n');
        if (nl != std::string::npos) {
            line.resize(nl);
            if (!line.empty() && line.back() == '\r') line.pop_back();
            (void)write_all(c, answer(line), 2000);
        }
        ::close(c);
    }
}

std::vector<std::string> list_sockets() {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(stat_dir(), ec)) {
        const std::string p = e.path().string();
        if (e.path().extension() != ".sock") continue;
        const int fd = connect_unix(p);
        if (fd >= 0) {
            ::close(fd);
            out.push_back(p);
        } else if (errno == ECONNREFUSED) {
            ::unlink(p.c_str());  // its process ended without removing it
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::optional<std::string> request(const std::string& socket_path, const std::string& line,
                                   int timeout_ms) {
    const int fd = connect_unix(socket_path);
    if (fd < 0) return std::nullopt;
    if (!write_all(fd, line + "\n", timeout_ms)) {
        ::close(fd);
        return std::nullopt;
    }
    std::string out;
    char buf[65536];
    for (;;) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, timeout_ms) <= 0) {
            ::close(fd);
            return std::nullopt;
        }
        const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            ::close(fd);
            return std::nullopt;
        }
        if (n == 0) break;
        out.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return out;
}

}  // namespace mroce::obs
