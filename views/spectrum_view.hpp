// The embedding's covariance spectrum: eigenvalues (log scale) and cumulative
// explained variance, with a rank marker the user drags (or sets in the spin
// box) that shows what PCA at that rank keeps and costs. Every number shown is
// given in SpectrumData (computed by the engine); the view only lays it out.
#pragma once

#include <QString>
#include <QVector>
#include <QWidget>

class QCustomPlot;
class QCPItemStraightLine;
class QLabel;
class QSpinBox;
class QMouseEvent;

namespace embedlab::views {

struct SpectrumData {
    QString label;                  // e.g. the model path
    QVector<double> eigenvalues;    // descending, length d
    QVector<double> explained;      // cumulative share at k = 1..d
    QVector<double> params_at_rank; // PCA parameters at k = 1..d
    QVector<double> flops_at_rank;  // FLOPs per token through the factors at k = 1..d
    double original_params = 0;     // V x d
};

class SpectrumView : public QWidget {
    Q_OBJECT
public:
    explicit SpectrumView(QWidget* parent = nullptr);
    void setData(const SpectrumData& data);
    const SpectrumData& data() const { return data_; }
    int rank() const { return rank_; }
    QCustomPlot* plot() const { return plot_; }
    QString summary() const; // the text under the plot

public slots:
    void setRank(int k); // clamped to 1..d

signals:
    void rankChanged(int k);

private:
    void dragTo(QMouseEvent* event);

    QCustomPlot* plot_;
    QCPItemStraightLine* marker_;
    QSpinBox* spin_;
    QLabel* stats_;
    SpectrumData data_;
    int rank_ = 1;
};

} // namespace embedlab::views
