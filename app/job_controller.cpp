#include "job_controller.hpp"

#include <QElapsedTimer>
#include <QThread>

#ifdef __linux__
#include <cstdint>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace embedlab::app {

namespace {

// Asks the kernel to serve the calling (GUI) thread with a short time slice:
// under EEVDF (Linux 6.12+) a shorter slice means an earlier deadline, so the
// event loop gets a core soon after waking instead of waiting behind the
// engine's compute threads for the rest of their slices (at 0.5B the GUI
// thread's own work per stall was a few ms; the rest was that wait). Its CPU
// share (nice) is unchanged, so jobs run as fast; older kernels ignore it.
void request_short_scheduler_slice()
{
#if defined(__linux__) && defined(SYS_sched_setattr)
    struct {
        uint32_t size;
        uint32_t sched_policy;
        uint64_t sched_flags;
        int32_t sched_nice;
        uint32_t sched_priority;
        uint64_t sched_runtime, sched_deadline, sched_period;
    } attr{};
    attr.size = sizeof(attr);
    attr.sched_policy = 0; // SCHED_OTHER
    attr.sched_nice = ::getpriority(PRIO_PROCESS, 0);
    attr.sched_runtime = 100'000;               // ns: the kernel's shortest slice
    ::syscall(SYS_sched_setattr, 0, &attr, 0u); // advice: a refusal costs latency only
#endif
}

} // namespace

JobController::JobController(QObject* parent)
    : QObject(parent), thread_(new QThread(this)), worker_(new QObject),
      cancel_(std::make_shared<std::atomic<bool>>())
{
    request_short_scheduler_slice();
    thread_->setObjectName("embedlab-engine");
    worker_->moveToThread(thread_);
    connect(thread_, &QThread::finished, worker_, &QObject::deleteLater);
    thread_->start();
}

JobController::~JobController()
{
    queue_.clear();
    cancel_->store(true);
    thread_->quit();
    thread_->wait();
}

int JobController::submit(const QString& name, Work work)
{
    const int id = next_id_++;
    queue_.push_back({id, name, work});
    submitted_[id] = {id, name, std::move(work)};
    emit queued(id, name);
    if (running_ < 0)
        startNext();
    return id;
}

int JobController::resubmit(int id)
{
    const auto it = submitted_.find(id);
    if (it == submitted_.end() || id == running_)
        return -1;
    for (const auto& queued : queue_)
        if (queued.id == id)
            return -1;
    const Job job = it->second; // a copy: submit() adds to submitted_
    return submit(job.name, job.work);
}

void JobController::cancel(int id)
{
    if (id == running_) {
        cancel_->store(true);
        return;
    }
    for (auto it = queue_.begin(); it != queue_.end(); ++it)
        if (it->id == id) {
            queue_.erase(it);
            emit cancelled(id);
            return;
        }
}

void JobController::startNext()
{
    if (running_ >= 0 || queue_.empty())
        return;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    running_ = job.id;
    cancel_ = std::make_shared<std::atomic<bool>>(false); // a fresh flag per job
    emit started(job.id);
    QMetaObject::invokeMethod(
        worker_,
        [this, id = job.id, name = job.name, work = std::move(job.work), cancel = cancel_] {
            // Engine thread from here on.
            QElapsedTimer clock, since_report;
            clock.start();
            since_report.start();
            const ProgressFn progress = [&, id](int64_t done, int64_t total) {
                if (since_report.elapsed() >= 50 || done == total) { // keep the GUI's queue short
                    since_report.restart();
                    QMetaObject::invokeMethod(
                        this, [this, id, done, total] { emit this->progress(id, done, total); },
                        Qt::QueuedConnection);
                }
                return !cancel->load();
            };
            try {
                auto deliver = work(progress);
                if (cancel->load())
                    throw Cancelled();
                const double seconds = clock.elapsed() / 1000.0;
                QMetaObject::invokeMethod(
                    this,
                    [this, id, name, seconds, deliver = std::move(deliver)] {
                        QElapsedTimer gui;
                        gui.start();
                        if (deliver)
                            deliver();
                        emit finished(id, seconds);
                        if (const double ms = gui.nsecsElapsed() / 1e6; ms > slowest_delivery_.ms)
                            slowest_delivery_ = {name, ms};
                        jobEnded(id);
                    },
                    Qt::QueuedConnection);
            } catch (const Cancelled&) {
                QMetaObject::invokeMethod(
                    this,
                    [this, id] {
                        emit cancelled(id);
                        jobEnded(id);
                    },
                    Qt::QueuedConnection);
            } catch (const std::exception& e) {
                QMetaObject::invokeMethod(
                    this,
                    [this, id, message = QString::fromStdString(e.what())] {
                        emit failed(id, message);
                        jobEnded(id);
                    },
                    Qt::QueuedConnection);
            }
        },
        Qt::QueuedConnection);
}

void JobController::jobEnded(int id)
{
    if (id == running_)
        running_ = -1;
    startNext();
}

} // namespace embedlab::app
