#include "kiln/fault/daemon_relay.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <regex>

extern char** environ;

namespace kiln::fault {
namespace {

// "tcp://10.0.0.1,172.17.0.1:43455:24,16": the addresses (first apart), the port.
const std::regex kTcpContact(R"(tcp://([0-9.]+)((?:,[0-9.]+)*):([0-9]+):)");
const std::regex kTcp6Contact(R"(;tcp6://[^;"' ]*)");

// A daemon's link that ends while its session still runs is taken for a lost host after this long: a daemon that
// exits cleanly closes its link a moment before its session (ssh) ends with 0.
constexpr auto kSessionGrace = std::chrono::seconds(5);
// Bytes from mpirun that a silent host's daemon has not taken are dropped beyond this: nothing reads them.
constexpr std::size_t kMaxPending = 64u << 20;

int signalPipe[2] = {-1, -1};

void onSignal(int signal) {
    const char c = static_cast<char>(signal);
    [[maybe_unused]] const auto n = write(signalPipe[1], &c, 1);
}

void say(const std::string& host, const std::string& what) {
    std::fprintf(stderr, "kiln launch-relay: %s: %s\n", host.c_str(), what.c_str());
}

// The host the agent is asked to reach: its first argument that is not an option (for messages only).
std::string hostOf(const std::vector<std::string>& args) {
    for (const auto& a : args)
        if (!a.empty() && a[0] != '-') return a;
    return "?";
}

bool sendAll(int fd, const char* data, std::size_t size) {
    while (size > 0) {
        const ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        data += n;
        size -= static_cast<std::size_t>(n);
    }
    return true;
}

int connectTo(const RuntimeContact& contact) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(contact.port));
    if (fd < 0 || inet_pton(AF_INET, contact.address.c_str(), &to.sin_addr) != 1 ||
        connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

// One daemon's connection and the relay's own to mpirun.
struct Link {
    int daemon = -1, mpirun = -1;
    std::string toDaemon;  // from mpirun, not yet taken by the daemon (its side is non-blocking)
    std::optional<std::chrono::steady_clock::time_point> daemonEndedAt;
    bool hidden = false;  // the daemon is lost; mpirun's side stays open and silent
};

void closeFd(int& fd) {
    if (fd >= 0) close(fd);
    fd = -1;
}

class Relay {
public:
    Relay(std::string host, RuntimeContact contact) : host_(std::move(host)), contact_(std::move(contact)) {}

    int listen() {
        listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in any{};
        any.sin_family = AF_INET;
        any.sin_addr.s_addr = htonl(INADDR_ANY);
        socklen_t size = sizeof any;
        if (listener_ < 0 || bind(listener_, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0 ||
            ::listen(listener_, 16) != 0 || getsockname(listener_, reinterpret_cast<sockaddr*>(&any), &size) != 0)
            return -1;
        return ntohs(any.sin_port);
    }

    // Until the session has ended and mpirun closed every link, or a signal ends the relay.
    int run(pid_t session) {
        std::optional<int> status;
        for (;;) {
            std::vector<pollfd> fds{{signalPipe[0], POLLIN, 0}, {listener_, POLLIN, 0}};
            for (const auto& l : links_) {
                fds.push_back({l.daemon, static_cast<short>(l.daemon < 0 ? 0 : POLLIN | (l.toDaemon.empty() ? 0 : POLLOUT)), 0});
                fds.push_back({l.mpirun, POLLIN, 0});
            }
            if (poll(fds.data(), fds.size(), 500) < 0 && errno != EINTR) return 255;
            if (fds[0].revents & POLLIN) {
                char c[16];
                const ssize_t n = read(signalPipe[0], c, sizeof c);
                for (ssize_t i = 0; i < n; ++i) {
                    if (c[i] != SIGCHLD) {  // mpirun ends the agents it started
                        kill(session, SIGTERM);
                        return 0;
                    }
                }
            }
            int raw = 0;
            if (!status && waitpid(session, &raw, WNOHANG) == session)
                status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
            const std::size_t polled = links_.size();  // a link accepted now has no poll entry yet
            if (fds[1].revents & POLLIN) accept();
            for (std::size_t i = 0; i < polled; ++i) serve(links_[i], fds[2 + 2 * i], fds[3 + 2 * i]);
            for (auto& l : links_) decide(l, status);
            std::erase_if(links_, [](const Link& l) { return l.mpirun < 0; });
            if (status) {
                if (!connected_) return *status;  // the daemon never reached mpirun: a failed launch, as reported
                if (links_.empty()) return 0;
            } else if (connected_ && links_.empty()) {
                endSessionOfGoneMpirun(session);
            }
        }
    }

private:
    void accept() {
        const int daemon = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (daemon < 0) return;
        const int mpirun = connectTo(contact_);
        if (mpirun < 0) {
            say(host_, "mpirun's contact " + contact_.address + ":" + std::to_string(contact_.port) +
                           " refused the relay: " + std::strerror(errno));
            close(daemon);
            return;
        }
        links_.push_back(Link{daemon, mpirun, {}, {}, false});
        connected_ = true;
    }

    void serve(Link& l, const pollfd& daemon, const pollfd& mpirun) {
        char buffer[1 << 16];
        if (l.daemon >= 0 && (daemon.revents & (POLLIN | POLLHUP | POLLERR))) {
            const ssize_t n = read(l.daemon, buffer, sizeof buffer);
            if (n > 0) {
                if (!sendAll(l.mpirun, buffer, static_cast<std::size_t>(n))) closeFd(l.mpirun);
            } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                daemonEnded(l);
            }
        }
        if (l.daemon >= 0 && (daemon.revents & POLLOUT) && !l.toDaemon.empty()) {
            const ssize_t n = send(l.daemon, l.toDaemon.data(), l.toDaemon.size(), MSG_NOSIGNAL);
            if (n > 0) l.toDaemon.erase(0, static_cast<std::size_t>(n));
            else if (n < 0 && errno != EAGAIN && errno != EINTR) daemonEnded(l);
        }
        if (l.mpirun >= 0 && (mpirun.revents & (POLLIN | POLLHUP | POLLERR))) {
            const ssize_t n = read(l.mpirun, buffer, sizeof buffer);
            if (n > 0) {
                if (l.daemon >= 0 && l.toDaemon.size() < kMaxPending) l.toDaemon.append(buffer, static_cast<std::size_t>(n));
            } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                closeFd(l.mpirun);  // mpirun closed the link (it ends the daemon, or itself): the daemon's goes too
                closeFd(l.daemon);
            }
        }
    }

    // mpirun closed every link (it ended, or was ended) and the session lives on: nothing is left to relay, and the
    // session of a lost host can wait long after (srun for a step on a node cut off). Asked to end after the grace
    // a daemon's own exit takes, then killed; the loop returns once it has ended.
    void endSessionOfGoneMpirun(pid_t session) {
        const auto now = std::chrono::steady_clock::now();
        if (!mpirunGoneAt_) mpirunGoneAt_ = now;
        const auto waited = now - *mpirunGoneAt_;
        if (waited > 2 * kSessionGrace) {
            kill(session, SIGKILL);
        } else if (waited > kSessionGrace && !sessionAsked_) {
            kill(session, SIGTERM);
            sessionAsked_ = true;
        }
    }

    void daemonEnded(Link& l) {
        closeFd(l.daemon);
        l.toDaemon.clear();
        l.daemonEndedAt = std::chrono::steady_clock::now();
    }

    // A daemon that exited cleanly: its session ends with 0, and mpirun sees the link close. Anything else is a
    // lost host, kept from mpirun.
    void decide(Link& l, const std::optional<int>& status) {
        if (!l.daemonEndedAt || l.hidden || l.mpirun < 0) return;
        if (status && *status == 0) {
            closeFd(l.mpirun);
            return;
        }
        if (!status && std::chrono::steady_clock::now() - *l.daemonEndedAt < kSessionGrace) return;
        l.hidden = true;
        say(host_, "its daemon's link to mpirun ended (" +
                       (status ? "its session ended with status " + std::to_string(*status)
                               : std::string("its session still open 5 s later")) +
                       "); mpirun is not told, so that the job goes on: the ranks' ULFM finds the host's ranks failed");
    }

    std::string host_;
    RuntimeContact contact_;
    int listener_ = -1;
    bool connected_ = false;
    std::vector<Link> links_;
    std::optional<std::chrono::steady_clock::time_point> mpirunGoneAt_;
    bool sessionAsked_ = false;
};

}  // namespace

std::optional<RuntimeContact> runtimeContactOf(const std::vector<std::string>& args) {
    for (const auto& a : args) {
        std::smatch m;
        if (std::regex_search(a, m, kTcpContact)) return RuntimeContact{m[1].str(), std::stoi(m[3].str())};
    }
    return std::nullopt;
}

std::vector<std::string> throughRelay(const std::vector<std::string>& args, int relayPort) {
    std::vector<std::string> out;
    out.reserve(args.size());
    for (const auto& a : args) {
        const std::string v4only = std::regex_replace(a, kTcp6Contact, "");
        out.push_back(std::regex_replace(v4only, kTcpContact, "tcp://$1$2:" + std::to_string(relayPort) + ":"));
    }
    return out;
}

std::vector<std::string> asSlurmStep(const std::vector<std::string>& args) {
    std::size_t at = 0;
    while (at < args.size() && !args[at].empty() && args[at][0] == '-') ++at;  // ssh's options: not srun's
    std::string command;
    for (std::size_t i = at + 1; i < args.size(); ++i) command += (command.empty() ? "" : " ") + args[i];
    return {"srun", "--overlap", "--quiet", "--nodes=1", "--ntasks=1", "--nodelist=" + (at < args.size() ? args[at] : ""),
            "--whole", "--kill-on-bad-exit=0", "--mpi=none", "/bin/sh", "-c", command};
}

int runDaemonRelay(const std::vector<std::string>& agent, const std::vector<std::string>& args) {
    const std::string host = hostOf(args);
    std::vector<std::string> command = agent;
    const auto contact = runtimeContactOf(args);
    std::optional<Relay> relay;
    if (contact) {
        relay.emplace(host, *contact);
        const int port = relay->listen();
        if (port <= 0) {
            say(host, std::string("cannot listen for the daemon's link: ") + std::strerror(errno));
            return 255;
        }
        if (agent.size() == 1 && agent[0] == "srun") {
            command = asSlurmStep(throughRelay(args, port));
        } else {
            for (auto& a : throughRelay(args, port)) command.push_back(std::move(a));
        }
    } else {
        command.insert(command.end(), args.begin(), args.end());  // no daemon: nothing to relay
    }
    std::vector<char*> argv;
    for (auto& a : command) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (!relay) {
        execvp(argv[0], argv.data());
        say(host, "cannot start the agent '" + command[0] + "' (KILN_SSH_AGENT): " + std::strerror(errno));
        return 255;
    }
    if (pipe2(signalPipe, O_CLOEXEC | O_NONBLOCK) != 0) return 255;
    struct sigaction action{};
    action.sa_handler = onSignal;
    action.sa_flags = SA_RESTART;
    for (const int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaction(s, &action, nullptr);

    pid_t session = 0;
    if (const int e = posix_spawnp(&session, argv[0], nullptr, nullptr, argv.data(), environ); e != 0) {
        say(host, "cannot start the agent '" + command[0] + "' (KILN_SSH_AGENT): " + std::strerror(e));
        return 255;
    }
    return relay->run(session);
}

}  // namespace kiln::fault
