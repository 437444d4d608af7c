// The Compare tab's wiring: the results rows it can compare, Generate / Stop and
// the text mode as jobs on the engine thread, tokens into the view as they come
// (queued to the GUI thread). The view draws; compare_analyses.hpp computes.
#pragma once

#include <QObject>
#include <QString>
#include <QVector>
#include <functional>

#include "embedlab/experiment_request.hpp"

namespace embedlab::views {
class CompareView;
}

namespace embedlab::app {

class JobController;

class CompareTab : public QObject {
    Q_OBJECT
public:
    struct Run {
        int row = -1; // in the results table
        QString name; // "pca rank 16 (tinyllama)"
        CompressionRequest request;
        bool encoder = false; // compared by its sentence embeddings (it cannot generate)
    };
    using RunsFn = std::function<QVector<Run>()>;
    using CancelFn = std::function<void(int job)>;
    CompareTab(views::CompareView* view, JobController& jobs, RunsFn runs, CancelFn cancel,
               QObject* parent = nullptr);

    // Fills the view's run list; `row` (a results row) is chosen when it is one of them.
    void refreshRuns(int row = -1);
    int generate(); // the job id, -1 when nothing can run (the view says why)
    int measure();  // the text mode's job
    int embed();    // the embeddings mode's job
    void stop();
    int generateJob() const { return generate_job_; }
    const Run* shownRun() const; // the run the box shows (null: none), as last listed

private:
    const Run* chosen();

    views::CompareView* view_;
    JobController& jobs_;
    RunsFn runs_fn_;
    CancelFn cancel_;
    QVector<Run> runs_;
    bool refuseEncoder(const Run& run); // generation and KL are a decoder's: says what applies
    int generate_job_ = -1, text_job_ = -1, embed_job_ = -1;
};

} // namespace embedlab::app
