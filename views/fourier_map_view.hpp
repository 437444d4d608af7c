// The Fourier token map (METHODS 4) over a range of token ids: heatmaps (id
// across, dimension up) of the features T, MLP(T), the fitted E and the
// original rows, whichever are given; one chosen dimension against token id
// for each; and the cosine of neighbouring ids (p, p+1). Everything is one
// QCustomPlot so it exports as one figure. Values come from the engine.
#pragma once

#include <QString>
#include <QStringList>
#include <QVector>

#include "plot_view.hpp"

class QCPAxisRect;
class QCPMarginGroup;
class QLabel;
class QSpinBox;

namespace embedlab::views {

struct FourierMatrix {
    QString name;              // "T", "MLP(T)", "E", "original"
    QVector<double> values;    // row-major [count, dim]: row i is token first + i
    QVector<double> neighbour; // cosine of rows i and i+1, count - 1 values
};

struct FourierMapData {
    QString label;
    int first = 0, count = 0, dim = 0;
    QVector<FourierMatrix> matrices;
    QStringList tokens; // token texts for first..first+count-1 (may be empty)
    QString note;       // e.g. why there is no fitted E
};

class FourierMapView : public DataPlotView<FourierMapData> {
    Q_OBJECT
public:
    explicit FourierMapView(QWidget* parent = nullptr);
    int dimension() const { return dimension_; }
    QCPAxisRect* lineRect() const { return line_rect_; }
    QCPAxisRect* neighbourRect() const { return neighbour_rect_; }
    QString summary() const; // mean neighbour cosine of each matrix
    // The heatmaps in long form (matrix, token id, token, feature index, value), then
    // the chosen dimension's lines and the neighbour cosines.
    QVector<DataTable> dataTables() const override;

public slots:
    void setDimension(int i); // clamped to 0..dim-1

private:
    void draw() override;
    void rebuild();

    QCPAxisRect* line_rect_ = nullptr;
    QCPAxisRect* neighbour_rect_ = nullptr;
    QCPMarginGroup* heights_ = nullptr; // heatmaps and their colour bars: one height
    QSpinBox* spin_;
    QLabel* stats_;
    int dimension_ = 0;
};

} // namespace embedlab::views
