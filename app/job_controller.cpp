#include "job_controller.hpp"

#include <QElapsedTimer>
#include <QThread>
#include <exception>

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace embedlab::app {

namespace {

// Hands the memory a finished job freed back to the system. A 16-bit model's
// float32 weights are tens of allocations under glibc's mmap threshold; freed,
// they stay in the engine thread's arena, so the GUI held 2 GB between jobs and
// the next job's model came on top of it.
void return_freed_memory()
{
#ifdef __GLIBC__
    ::malloc_trim(0);
#endif
}

} // namespace

JobController::JobController(QObject* parent)
    : QObject(parent), thread_(new QThread(this)), worker_(new QObject),
      cancel_(std::make_shared<std::atomic<bool>>())
{
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
            // The job's result or error, then whatever it freed goes back to the
            // system before anything reaches the GUI thread.
            std::function<void()> deliver;
            std::exception_ptr error;
            try {
                deliver = work(progress);
            } catch (...) {
                error = std::current_exception();
            }
            return_freed_memory();
            try {
                if (error)
                    std::rethrow_exception(error);
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
