// The LLE tab's damage panel (issue 39 part 3): a results row (and optionally a
// second, e.g. pca against lle at the same bytes) measured against the original
// on its evaluation text as a job on the engine thread; the damage-by-frequency
// plot, and the neighbour graph coloured by the first run's damage per token.
// The views draw; damage_analyses.hpp computes.
#pragma once

#include <QString>
#include <QVector>
#include <QWidget>
#include <functional>

#include "embedlab/experiment_request.hpp"

class QComboBox;
class QLabel;
class QPushButton;

namespace embedlab::views {
class NeighbourGraphView;
class TokenDamageView;
} // namespace embedlab::views

namespace embedlab::app {

class JobController;

class DamagePanel : public QWidget {
    Q_OBJECT
public:
    struct Run {
        QString name; // "pca rank 16 (tinyllama)"
        CompressionRequest request;
    };
    using RunsFn = std::function<QVector<Run>()>;
    enum ColourBy { LleCosine, KlAsTarget, OneMinusCosine };
    DamagePanel(views::NeighbourGraphView* graph, JobController& jobs, RunsFn runs,
                QWidget* parent = nullptr);

    void refreshRuns();                          // the results rows that ran here; the choices kept by name
    void chooseRuns(int first, int second = -1); // indices into the runs (-1: none beside)
    int compute();                               // the job id, -1 when no run is chosen (the status says why)
    void setColourBy(ColourBy c);                // the neighbour graph's colouring
    views::TokenDamageView* view() const { return view_; }
    QString status() const;

private:
    void applyColour();

    views::NeighbourGraphView* graph_;
    JobController& jobs_;
    RunsFn runs_fn_;
    QVector<Run> runs_;
    QComboBox* first_;
    QComboBox* second_;
    QComboBox* colour_;
    QLabel* status_;
    views::TokenDamageView* view_;
    QString damaged_;                    // the first run's name, once measured
    QVector<double> kl_, one_minus_cos_; // its per-token damage
};

} // namespace embedlab::app
