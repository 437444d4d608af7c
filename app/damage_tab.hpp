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
        QString model; // the model it compressed (as openModel was given it)
    };
    using RunsFn = std::function<QVector<Run>()>;
    enum ColourBy { LleCosine, KlAsTarget, OneMinusCosine };
    DamagePanel(views::NeighbourGraphView* graph, JobController& jobs, RunsFn runs,
                QWidget* parent = nullptr);

    // The results rows that ran here; the choices kept by name, else the loaded
    // model's latest run is chosen (none: no run of it). A computed plot and
    // colouring are cleared once the chosen runs are not theirs (the status says so).
    void refreshRuns();
    // A model was loaded: its runs are offered first; the plot and colour-by are reset.
    void setModel(const QString& model);
    void chooseRuns(int first, int second = -1); // indices into the runs (-1: none beside)
    int compute();                               // the job id, -1 when no run is chosen (the status says why)
    void setColourBy(ColourBy c);                // the neighbour graph's colouring
    views::TokenDamageView* view() const { return view_; }
    QString status() const;

    QComboBox* runBox() const { return first_; }
    QComboBox* besideBox() const { return second_; }
    QComboBox* colourBox() const { return colour_; }

private:
    void applyColour();
    QStringList chosenNames() const; // the run, and the one beside it if any
    void dropStale();                // the plot and colouring of runs no longer chosen

    views::NeighbourGraphView* graph_;
    JobController& jobs_;
    RunsFn runs_fn_;
    QVector<Run> runs_;
    QComboBox* first_;
    QComboBox* second_;
    QComboBox* colour_;
    QLabel* status_;
    views::TokenDamageView* view_;
    QString model_;                      // the loaded model
    QString damaged_;                    // the first run's name, once measured
    QStringList measured_;               // the runs the plot shows (chosenNames when measured)
    QVector<double> kl_, one_minus_cos_; // its per-token damage
};

} // namespace embedlab::app
